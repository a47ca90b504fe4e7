"""Reads: list-then-watch keeps the caches current; 410 re-lists; failures back off; stop is
prompt. Every test runs the real client against the emulator over HTTP."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

from agent.cluster.port import DYNAMO_GRAPH
from tests.fake_kube import DGDS, NODES, PODS, KubeEmulator
from tests.unit.cluster.builders import aggregated, scaled
from tests.unit.kube import builders
from tests.unit.kube.conftest import FAST, Connect, MakeCluster, StartEmulator, eventually


def watches(emulator: KubeEmulator, plural: str) -> list[Any]:
    return [r for r in emulator.requests(method="GET") if r.watch and plural in r.path]


def lists(emulator: KubeEmulator, plural: str) -> list[Any]:
    return [r for r in emulator.requests(method="GET") if not r.watch and plural in r.path]


def names(values: list[Any]) -> list[str]:
    return [v.name for v in values]


def test_the_first_list_fills_the_caches(emulator: KubeEmulator, make_cluster: MakeCluster) -> None:
    emulator.store.apply(DGDS, "default", "llama", aggregated(), manager="helm", force=False)
    emulator.store.update(PODS, builders.pod(), manager="kubelet")
    emulator.store.update(NODES, builders.node(gpus=4), manager="kubelet")

    cluster = make_cluster()

    assert names(cluster.list_dgds()) == ["llama"]
    assert names(cluster.list_pods()) == ["llama-worker-0"]
    [node] = cluster.list_nodes()
    assert (node.name, node.allocatable_gpus) == ("gpu-node-1", 4)


def test_watch_events_keep_the_cache_current_and_move_the_revision(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    start = cluster.revision()

    emulator.store.update(PODS, builders.pod(ready=False), manager="kubelet")
    eventually(lambda: cluster.list_pods(), what="ADDED pod")
    added = cluster.revision()
    assert added > start
    assert cluster.list_pods()[0].ready is False

    emulator.store.update(PODS, builders.pod(ready=True), manager="kubelet")
    eventually(lambda: cluster.list_pods()[0].ready, what="MODIFIED pod")
    assert cluster.revision() > added

    emulator.store.delete(PODS, "default", "llama-worker-0")
    eventually(lambda: not cluster.list_pods(), what="DELETED pod")

    emulator.store.apply(DGDS, "default", "llama", aggregated(), manager="helm", force=False)
    eventually(lambda: cluster.list_dgds(), what="ADDED DGD")
    emulator.store.apply(
        DGDS,
        "default",
        "llama",
        scaled(aggregated(), "VllmWorker", 4),
        manager="helm",
        force=False,
    )
    eventually(
        lambda: cluster.list_dgds()[0].spec["services"]["VllmWorker"]["replicas"] == 4,
        what="MODIFIED DGD",
    )
    emulator.store.edit(
        DGDS,
        "default",
        "llama",
        lambda o: o.update(status={"state": "successful"}),
        manager="dynamo-operator",
    )
    eventually(lambda: cluster.list_dgds()[0].status == {"state": "successful"}, what="status")
    emulator.store.delete(DGDS, "default", "llama")
    eventually(lambda: not cluster.list_dgds(), what="DELETED DGD")

    emulator.store.update(NODES, builders.node(gpus=8), manager="kubelet")
    eventually(lambda: cluster.list_nodes(), what="ADDED node")
    emulator.store.update(NODES, builders.node(gpus=7), manager="kubelet")
    eventually(lambda: cluster.list_nodes()[0].allocatable_gpus == 7, what="MODIFIED node")

    # All of that through one list and one watch per kind: watches, not polling.
    assert len(lists(emulator, "pods")) == 1
    assert len(watches(emulator, "pods")) == 1


def test_changes_to_fields_nobody_reads_leave_the_revision_still(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    emulator.store.update(PODS, builders.pod(), manager="kubelet")
    cluster = make_cluster()
    before = cluster.revision()

    emulator.store.edit(
        PODS,
        "default",
        "llama-worker-0",
        lambda o: o["status"].update(podIP="10.0.0.9"),
        manager="kubelet",
    )
    emulator.store.edit(
        PODS,
        "default",
        "llama-worker-0",
        lambda o: o["status"].update(hostIP="10.1.0.1"),
        manager="kubelet",
    )
    # A marker change after them: once it shows, the two before it were processed too.
    emulator.store.update(NODES, builders.node(), manager="kubelet")
    eventually(lambda: cluster.list_nodes(), what="the marker node")
    assert cluster.revision() == before + 1


def test_only_pods_of_a_dgd_are_listed_and_watched(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    emulator.store.update(PODS, builders.pod("llama-worker-0"), manager="kubelet")
    emulator.store.update(PODS, builders.pod("coredns-1", graph=None), manager="kubelet")
    cluster = make_cluster()
    emulator.store.update(PODS, builders.pod("unrelated-2", graph=None), manager="kubelet")
    emulator.store.update(PODS, builders.pod("llama-worker-1"), manager="kubelet")

    eventually(lambda: len(cluster.list_pods()) == 2, what="the second worker")
    assert names(cluster.list_pods()) == ["llama-worker-0", "llama-worker-1"]
    for request in lists(emulator, "pods") + watches(emulator, "pods"):
        assert request.path == "/api/v1/pods"
        assert request.query["labelSelector"] == DYNAMO_GRAPH


def test_a_pod_that_loses_its_dgd_label_leaves_the_cache(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    emulator.store.update(PODS, builders.pod(), manager="kubelet")
    cluster = make_cluster()
    emulator.store.edit(
        PODS,
        "default",
        "llama-worker-0",
        lambda o: o["metadata"]["labels"].pop(DYNAMO_GRAPH),
        manager="kubectl-label",
    )
    eventually(lambda: not cluster.list_pods(), what="the relabelled pod to go")


def test_a_namespace_set_watches_only_those_namespaces(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    for namespace in ("serving", "research", "default"):
        emulator.store.apply(
            DGDS, namespace, "llama", aggregated(namespace=namespace), manager="helm", force=False
        )
        emulator.store.update(PODS, builders.pod(namespace=namespace), manager="kubelet")
    cluster = make_cluster(namespaces=("serving", "research"))

    assert sorted(d.namespace for d in cluster.list_dgds()) == ["research", "serving"]
    assert sorted(p.namespace for p in cluster.list_pods()) == ["research", "serving"]
    paths = {r.path for r in emulator.requests(method="GET") if "nodes" not in r.path}
    assert paths == {
        # API discovery: which DGD versions are served (this emulator: v1alpha1 only).
        "/apis/nvidia.com/v1beta1",
        "/apis/nvidia.com/v1alpha1",
        "/apis/nvidia.com/v1alpha1/namespaces/serving/dynamographdeployments",
        "/apis/nvidia.com/v1alpha1/namespaces/research/dynamographdeployments",
        "/api/v1/namespaces/serving/pods",
        "/api/v1/namespaces/research/pods",
    }
    emulator.store.delete(DGDS, "serving", "llama")
    eventually(lambda: [d.namespace for d in cluster.list_dgds()] == ["research"], what="delete")


def test_an_expired_watch_re_lists_and_catches_up(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    emulator.store.update(PODS, builders.pod("llama-worker-0"), manager="kubelet")
    cluster = make_cluster()
    eventually(lambda: emulator.open_watches == 3, what="three open watches")

    # Changes the watch never sees (compacted away), then an ERROR 410 event: only a fresh
    # list can tell the truth.
    with emulator.store.unrecorded():
        emulator.store.delete(PODS, "default", "llama-worker-0")
        emulator.store.update(PODS, builders.pod("llama-worker-1"), manager="kubelet")
    assert names(cluster.list_pods()) == ["llama-worker-0"]
    emulator.expire_watches()

    eventually(lambda: names(cluster.list_pods()) == ["llama-worker-1"], what="the re-list")
    assert len(lists(emulator, "pods")) == 2


def test_a_410_answer_to_a_watch_request_re_lists(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    # Older API servers answer a too-old watch with HTTP 410 instead of an ERROR event.
    server = start_emulator(gone_as_status=True)
    cluster = connect(server)
    eventually(lambda: server.open_watches == 3, what="three open watches")

    with server.store.unrecorded():
        server.store.update(PODS, builders.pod(), manager="kubelet")
    server.close_watches()  # the client re-watches from a version now compacted

    eventually(lambda: len(lists(server, "pods")) == 2, what="a re-list after 410")
    eventually(lambda: names(cluster.list_pods()) == ["llama-worker-0"], what="the pod")
    assert int(watches(server, "pods")[1].query["resourceVersion"]) < server.store.floor


def test_a_watch_that_times_out_resumes_from_its_version_without_a_re_list(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    emulator.store.update(PODS, builders.pod(), manager="kubelet")
    eventually(lambda: cluster.list_pods(), what="the pod")
    version = emulator.store.rv

    emulator.close_watches()

    eventually(lambda: len(watches(emulator, "pods")) == 2, what="a second watch")
    second = watches(emulator, "pods")[1]
    assert second.query["resourceVersion"] == str(version)
    assert second.query["allowWatchBookmarks"] == "true"
    assert int(second.query["timeoutSeconds"]) == FAST.watch_timeout_s
    assert len(lists(emulator, "pods")) == 1


def test_a_broken_watch_resumes_from_the_last_event_it_saw(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster()
    emulator.store.update(PODS, builders.pod(), manager="kubelet")
    eventually(lambda: cluster.list_pods(), what="the pod")
    seen = emulator.store.rv

    emulator.break_connections()

    eventually(lambda: len(watches(emulator, "pods")) == 2, what="a second watch")
    assert watches(emulator, "pods")[1].query["resourceVersion"] == str(seen)
    assert len(lists(emulator, "pods")) == 1, "no re-list: the version is still good"
    assert names(cluster.list_pods()) == ["llama-worker-0"], "the cache kept its contents"


def test_bookmarks_move_the_version_a_watch_resumes_from(
    start_emulator: StartEmulator, connect: Connect
) -> None:
    server = start_emulator(bookmark_interval_s=0.05)
    connect(server)
    eventually(lambda: server.open_watches == 3, what="three open watches")
    first = watches(server, "pods")[0]

    # A node changes: the pod watch gets no event, only bookmarks carrying the new version.
    server.store.update(NODES, builders.node(), manager="kubelet")
    latest = server.store.rv
    time.sleep(0.3)
    server.close_watches()

    eventually(lambda: len(watches(server, "pods")) == 2, what="a second pod watch")
    resumed = int(watches(server, "pods")[1].query["resourceVersion"])
    assert resumed == latest > int(first.query["resourceVersion"])


def test_long_lists_are_read_in_pages(emulator: KubeEmulator, make_cluster: MakeCluster) -> None:
    for i in range(5):
        emulator.store.update(PODS, builders.pod(f"llama-worker-{i}"), manager="kubelet")
    cluster = make_cluster(tuning=replace(FAST, page_size=2))

    assert len(cluster.list_pods()) == 5
    pages = lists(emulator, "pods")
    rv = pages[1].query["continue"].split(":")[0]
    assert [p.query.get("continue") for p in pages] == [None, f"{rv}:2", f"{rv}:4"]
    assert all(p.query["limit"] == "2" for p in pages)


def test_the_pages_of_one_list_are_one_snapshot(emulator: KubeEmulator) -> None:
    """A pod created between two pages is not in that list (it comes by the watch), as the
    API server serves every page at the first page's resourceVersion."""
    import json
    import urllib.request

    for i in range(4):
        emulator.store.update(PODS, builders.pod(f"llama-worker-{i}"), manager="kubelet")
    base = f"{emulator.url}/api/v1/pods?limit=2"
    with urllib.request.urlopen(base) as response:
        first = json.load(response)
    emulator.store.update(PODS, builders.pod("llama-worker-00"), manager="kubelet")
    token = first["metadata"]["continue"]
    with urllib.request.urlopen(f"{base}&continue={token}") as response:
        second = json.load(response)
    names = [o["metadata"]["name"] for o in first["items"] + second["items"]]
    assert names == [f"llama-worker-{i}" for i in range(4)]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_an_expired_continue_token_mid_list_lists_again_from_the_start(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    """The store is compacted between two pages of the agent's list: the next page is a 410
    Expired; the agent lists again from the first page and has every pod."""
    for i in range(5):
        emulator.store.update(PODS, builders.pod(f"llama-worker-{i}"), manager="kubelet")
    compacted = threading.Event()

    def compact_once() -> None:
        if not compacted.is_set():
            compacted.set()
            emulator.store.update(PODS, builders.pod("llama-worker-5"), manager="kubelet")
            emulator.store.compact()

    emulator.after_page = compact_once
    cluster = make_cluster(tuning=replace(FAST, page_size=2))
    assert len(cluster.list_pods()) == 6
    expired = [r for r in lists(emulator, "pods") if r.status == 410]
    assert len(expired) == 1 and expired[0].query.get("continue")
    assert lists(emulator, "pods")[-1].status == 200


def test_a_failing_server_is_retried_with_growing_delays_not_in_a_loop(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    emulator.fail(500)
    tuning = replace(FAST, backoff_initial_s=0.1, backoff_max_s=0.4)
    cluster = make_cluster(sync=False, tuning=tuning)

    time.sleep(1.5)
    # Three watchers, delays 0.05-0.1, 0.1-0.2, 0.2-0.4, then 0.2-0.4 s: at most ~7 tries each
    # (a busy machine makes fewer, never more: the least is waited for, not counted on).
    assert len(emulator.requests()) / 3 <= 8
    eventually(lambda: len(emulator.requests()) >= 3 * 3, what="three tries per watcher")
    assert not cluster.synced
    assert cluster.wait_synced(0.05) is False

    emulator.heal()
    assert cluster.wait_synced(5.0), "recovers once the server does"


def test_a_server_that_ends_every_watch_at_once_is_not_hammered(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    # No error at all: each watch is answered 200 and closed at once. Still no spinning.
    make_cluster(tuning=replace(FAST, backoff_initial_s=0.1, backoff_max_s=0.4))
    stop = threading.Event()

    def close_forever() -> None:
        while not stop.wait(0.002):
            emulator.close_watches()

    closer = threading.Thread(target=close_forever, daemon=True)
    closer.start()
    try:
        time.sleep(1.5)
    finally:
        stop.set()
        closer.join()
    assert len(watches(emulator, "pods")) <= 9


def test_stop_ends_long_watches_promptly(emulator: KubeEmulator, make_cluster: MakeCluster) -> None:
    cluster = make_cluster(tuning=replace(FAST, watch_timeout_s=60))
    eventually(lambda: emulator.open_watches == 3, what="three open watches")
    started = time.monotonic()
    assert cluster.stop(timeout=5.0)
    assert time.monotonic() - started < 1.0
    eventually(lambda: emulator.open_watches == 0, what="the server to see the watches end")


def test_stop_ends_backoff_waits_promptly(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    emulator.fail(503)
    cluster = make_cluster(sync=False, tuning=replace(FAST, backoff_initial_s=30, backoff_max_s=30))
    eventually(lambda: len(emulator.requests()) >= 3, what="the first tries")
    started = time.monotonic()
    assert cluster.stop(timeout=5.0)
    assert time.monotonic() - started < 1.0


def test_listeners_hear_of_every_change(emulator: KubeEmulator, make_cluster: MakeCluster) -> None:
    heard: list[int] = []
    cluster = make_cluster(on_change=lambda: heard.append(1))
    before = len(heard)
    emulator.store.update(PODS, builders.pod(), manager="kubelet")
    eventually(lambda: cluster.list_pods(), what="the pod")
    assert len(heard) == before + 1


def test_stopped_watches_start_again_by_listing_afresh(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    # A DaemonSet pod watches only while it leads: leadership comes, goes and comes back.
    cluster = make_cluster()
    assert cluster.stop(timeout=5.0) and not cluster.synced and not cluster.running
    assert cluster.wait_synced(0.05) is False, "stopped watchers never sync"
    emulator.store.update(DGDS, aggregated("later", namespace="ml"), manager="kubectl")
    emulator.store.update(NODES, builders.node("n9"), manager="kubelet")
    lists_before = len(emulator.requests(method="GET"))

    cluster.start()

    assert cluster.wait_synced(5.0) and cluster.running
    assert [d.name for d in cluster.list_dgds()] == ["later"]
    assert [n.name for n in cluster.list_nodes()] == ["n9"]
    assert len(emulator.requests(method="GET")) > lists_before


def test_the_watch_loops_count_lists_watches_events_and_relists_for_the_metrics(
    emulator: KubeEmulator, make_cluster: MakeCluster
) -> None:
    from prometheus_client import generate_latest

    from agent.metrics import AgentMetrics

    cluster = make_cluster()
    eventually(lambda: emulator.open_watches == 3, what="three open watches")
    (pods,) = [name for name in cluster.watch_stats() if name.startswith("pods")]
    emulator.store.update(PODS, builders.pod(ready=False), manager="kubelet")
    emulator.store.update(PODS, builders.pod(ready=True), manager="kubelet")
    emulator.store.delete(PODS, "default", "llama-worker-0")
    eventually(lambda: cluster.watch_stats()[pods].events["DELETED"] == 1, what="the events")
    emulator.expire_watches()
    eventually(lambda: cluster.watch_stats()[pods].relists == 1, what="the re-list")
    stats = cluster.watch_stats()[pods]
    assert (stats.events["ADDED"], stats.events["MODIFIED"]) == (1, 1)
    eventually(lambda: cluster.watch_stats()[pods].lists == 2, what="the second list")
    # The watch after the re-list opens a moment after it: awaited, not read from the snapshot
    # taken before (a busy machine read 1 there).
    eventually(lambda: cluster.watch_stats()[pods].watches >= 2, what="the second watch")
    assert cluster.watch_stats()[pods].failures == 0

    metrics = AgentMetrics()
    metrics.watch(cluster.watch_stats)
    text = generate_latest(metrics.registry).decode()
    assert f'wingsmith_agent_watch_events_total{{type="DELETED",watch="{pods}"}} 1.0' in text
    assert f'wingsmith_agent_watch_relists_total{{watch="{pods}"}} 1.0' in text
