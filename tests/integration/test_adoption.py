"""Adoption and authority on the simulated fleet: discovered -> track | ignore | promote ->
observed (never written) -> review -> managed (no restart when the config matches)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.harness import Hub, SimAgent, wait_until

LEGACY_ARGS = [
    "--model",
    "Qwen/Qwen2.5-7B-Instruct",
    "--tensor-parallel-size",
    "2",
    "--max-model-len",
    "16384",
]


def legacy_dgd(name: str = "legacy-qwen", replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "backendFramework": "vllm",
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {
                        "mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.9.1"}
                    },
                },
                "VllmDecodeWorker": {
                    "componentType": "worker",
                    "replicas": replicas,
                    "resources": {"limits": {"gpu": "2"}},
                    "extraPodSpec": {
                        "mainContainer": {
                            "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.9.1",
                            "command": ["python3", "-m", "dynamo.vllm"],
                            "args": LEGACY_ARGS,
                        }
                    },
                },
            },
        },
    }


def seeded(tmp_path: Path, *dgds: dict[str, Any]) -> str:
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump_all(list(dgds)))
    return str(path)


def setup(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path, *dgds: dict[str, Any]
) -> SimAgent:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agent = agents(
        cluster_id="east", token=token, seed_path=seeded(tmp_path, *(dgds or (legacy_dgd(),)))
    )
    wait_until(lambda: hub.get("/v1/discovered")["discovered"], what="discovered")
    return agent


def worker_pods(agent: SimAgent) -> dict[str, float]:
    return {p.name: p.created_unix for p in agent.cluster.list_pods() if "worker" in p.name}


def test_the_agent_reports_a_dgd_it_did_not_create_as_discovered(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    setup(hub, agents, tmp_path)
    found = wait_until(
        lambda: (d := hub.get("/v1/discovered/east.ml.legacy-qwen"))["device_class"] and d,
        what="device class known",
    )
    assert found["state"] == "new" and found["gone"] is False
    assert (found["namespace"], found["dgd_name"], found["cluster_id"]) == (
        "ml",
        "legacy-qwen",
        "east",
    )
    assert found["backend_framework"] == "vllm"
    assert found["replicas"] == 2 and found["ready_replicas"] == 2
    assert found["imported_args"] == LEGACY_ARGS
    assert found["engine_version"] == "0.9.1"
    assert found["device_class"] == "H100-80GB"
    assert found["devices_per_replica"] == 2
    roles = {s["name"]: s["component_type"] for s in found["services"]}
    assert roles == {"Frontend": "frontend", "VllmDecodeWorker": "worker"}
    assert hub.get(f"/v1/discovered/{found['discovered_id']}") == found


def test_ignore_hides_an_entry_from_the_default_list_and_track_keeps_it(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    setup(hub, agents, tmp_path, legacy_dgd("one"), legacy_dgd("two"))
    wait_until(lambda: len(hub.get("/v1/discovered")["discovered"]) == 2, what="both found")
    ignored = hub.post("/v1/discovered/east.ml.one/ignore", {})
    assert ignored["state"] == "ignored"
    assert [d["dgd_name"] for d in hub.get("/v1/discovered")["discovered"]] == ["two"]
    every = hub.get("/v1/discovered?include_ignored=true")["discovered"]
    assert sorted(d["dgd_name"] for d in every) == ["one", "two"]
    tracked = hub.post("/v1/discovered/east.ml.two/track", {})
    assert tracked["state"] == "tracked"
    assert hub.get("/v1/deployments")["deployments"] == [], "tracking creates no deployment"


def test_a_discovered_workload_that_disappears_is_marked_gone_not_erased(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path)
    agent.cluster.delete_dgd("ml", "legacy-qwen")  # the test plays the DGD's other operator
    agent.agent.cluster_changed()
    gone = wait_until(
        lambda: (d := hub.get("/v1/discovered/east.ml.legacy-qwen"))["gone"] and d, what="gone"
    )
    assert gone["gone_time"] is not None and gone["imported_args"] == LEGACY_ARGS


def test_promote_review_and_take_control_without_restarting_pods(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path)
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"])
    before = worker_pods(agent)

    created = hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    assert created["name"] == "legacy-qwen" and created["replicas"] == 2
    assert created["placement"]["clusters"] == ["east"]
    assert created["serving"]["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert created["serving"]["tensor_parallel"] == 2
    assert created["serving"]["context_length"] == 16384
    assert created["serving"]["engine_version"] == "0.9.1"
    deployment = hub.get("/v1/deployments/legacy-qwen.east")
    assert deployment["authority"] == "observed"
    assert deployment["imported_args"] == LEGACY_ARGS and deployment["engine_args"] == []
    assert deployment["adopted_from"]["name"] == "legacy-qwen"
    assert hub.get("/v1/discovered/east.ml.legacy-qwen")["state"] == "promoted"
    wait_until(lambda: hub.get("/v1/deployments/legacy-qwen.east")["status"], what="reported")
    assert hub.get("/v1/projects/search")["usage"]["H100-80GB"]["used"] == 4, "what runs is charged"

    # Empty engine_args enforce nothing: taking control as it is would change nothing.
    review = hub.get("/v1/deployments/legacy-qwen.east/review")
    assert review["differences"] == [] and review["restarts_pods"] is False
    assert review["imported_args"] == LEGACY_ARGS and review["live_args"] == LEGACY_ARGS

    # Declared flags that differ from the live ones: promotion is refused while they do.
    hub.patch("/v1/workloads/legacy-qwen", {"serving": {"engine_args": LEGACY_ARGS[:4]}})
    review = wait_until(
        lambda: (r := hub.get("/v1/deployments/legacy-qwen.east/review"))["differences"] and r,
        what="engine_args drift",
    )
    assert [d["field"] for d in review["differences"]] == ["engine_args"]
    assert review["restarts_pods"] is True
    status, refused = hub.rest(
        "POST", "/v1/deployments/legacy-qwen.east/authority", {"authority": "managed"}, check=False
    )
    assert (status, refused["error"]["status"]) == (409, "FAILED_PRECONDITION")
    assert "engine_args" in refused["error"]["message"]
    assert hub.get("/v1/deployments/legacy-qwen.east")["authority"] == "observed"

    # The user decides to keep the imported flags; now the declaration matches.
    hub.patch("/v1/workloads/legacy-qwen", {"serving": {"engine_args": LEGACY_ARGS}})
    wait_until(lambda: not hub.get("/v1/deployments/legacy-qwen.east/review")["differences"])
    review = hub.get("/v1/deployments/legacy-qwen.east/review")
    assert "changes nothing" in review["summary"]
    promoted = hub.post("/v1/deployments/legacy-qwen.east/authority", {"authority": "managed"})
    assert promoted["authority"] == "managed"

    wait_until(
        lambda: agent.cluster.list_dgds()[0].labels.get("app.kubernetes.io/managed-by"),
        what="the agent took control",
    )
    (taken,) = agent.cluster.list_dgds()
    assert taken.labels["wingsmith.dev/deployment-id"] == promoted["deployment_id"]
    assert worker_pods(agent) == before, "no pod was restarted"
    assert taken.generation == 1, "the DGD's spec did not change: Dynamo rolls nothing"

    # Managed now: a scale at the hub reaches the cluster, still without restarting pods.
    hub.patch("/v1/workloads/legacy-qwen", {"replicas": 3})
    wait_until(lambda: len(worker_pods(agent)) == 3, what="scaled up")
    assert set(before) <= set(worker_pods(agent))


def test_promotion_counts_the_devices_the_pods_hold_once_before_the_agent_reports_again(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path)
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"])
    wait_until(
        lambda: hub.get("/v1/clusters/east")["devices"]["H100-80GB"]["allocated"] == 4,
        what="its two workers' devices allocated",
    )
    # The agent goes quiet, so what the hub says next comes from promotion alone: before the
    # fix it reserved the 4 devices the pods already held, and the cluster read 8 taken.
    agent.stop()
    hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    devices = hub.get("/v1/clusters/east")["devices"]["H100-80GB"]
    assert (devices["allocated"], devices["reserved"]) == (4, 0), devices
    assert devices["free"] == devices["total"] - 4
    usage = hub.get("/v1/projects/search")["usage"]["H100-80GB"]
    assert (usage["used"], usage["reserved"]) == (4, 0), usage
    deployment = hub.get("/v1/deployments/legacy-qwen.east")
    replicas = hub.get(f"/v1/replicas?deployment_id={deployment['deployment_id']}")["replicas"]
    assert sorted(r["name"] for r in replicas) == sorted(
        name for name in worker_pods(agent) if name.startswith("legacy-qwen")
    )


def test_an_observed_deployment_is_never_written_even_when_the_hub_wants_more(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path)
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"])
    hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    wait_until(lambda: hub.get("/v1/deployments/legacy-qwen.east")["status"], what="reported")
    spec_before = agent.cluster.list_dgds()[0].spec
    pods_before = worker_pods(agent)

    hub.patch("/v1/workloads/legacy-qwen", {"replicas": 4})
    drifted = wait_until(
        lambda: [
            d
            for d in hub.get("/v1/deployments/legacy-qwen.east")["drift"]
            if d["field"] == "replicas"
        ],
        what="replica drift shown",
    )
    assert drifted == [{"field": "replicas", "declared": "4", "observed": "2"}]
    rounds = agent.agent.reconciles
    wait_until(lambda: agent.agent.reconciles >= rounds + 2, what="two reconciles")
    assert agent.cluster.list_dgds()[0].spec == spec_before
    assert worker_pods(agent) == pods_before
    assert agent.agent.applied == 0


def test_accepting_differences_applies_the_declaration(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path)
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"])
    hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    new_args = [*LEGACY_ARGS[:-1], "8192"]
    hub.patch("/v1/workloads/legacy-qwen", {"serving": {"engine_args": new_args}})
    wait_until(lambda: hub.get("/v1/deployments/legacy-qwen.east")["status"], what="reported")
    before = worker_pods(agent)
    hub.post(
        "/v1/deployments/legacy-qwen.east/authority",
        {"authority": "managed", "accept_differences": True},
    )
    wait_until(
        lambda: not set(before) & set(worker_pods(agent)) and len(worker_pods(agent)) == 2,
        what="pods replaced with the new args",
    )
    pod = next(p for p in agent.cluster.list_pods() if "worker" in p.name)
    assert pod.argv[-1] == "8192"
    wait_until(
        lambda: hub.get("/v1/deployments/legacy-qwen.east")["rollout"]["state"] == "converged"
    )


def test_demotion_lets_go_and_deleting_the_workload_then_deletes_nothing(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path)
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"])
    hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    hub.patch("/v1/workloads/legacy-qwen", {"serving": {"engine_args": LEGACY_ARGS}})
    wait_until(lambda: hub.get("/v1/deployments/legacy-qwen.east")["status"], what="reported")
    wait_until(lambda: not hub.get("/v1/deployments/legacy-qwen.east/review")["differences"])
    hub.post("/v1/deployments/legacy-qwen.east/authority", {"authority": "managed"})
    wait_until(lambda: agent.cluster.list_dgds()[0].labels.get("app.kubernetes.io/managed-by"))
    pods = worker_pods(agent)

    demoted = hub.post("/v1/deployments/legacy-qwen.east/authority", {"authority": "observed"})
    assert demoted["authority"] == "observed"
    wait_until(
        lambda: "app.kubernetes.io/managed-by" not in agent.cluster.list_dgds()[0].labels,
        what="the agent let go",
    )
    hub.rest("DELETE", "/v1/workloads/legacy-qwen")
    rounds = agent.agent.reconciles
    wait_until(lambda: agent.agent.reconciles >= rounds + 2, what="two reconciles")
    assert [d.name for d in agent.cluster.list_dgds()] == ["legacy-qwen"], "nothing deleted"
    assert worker_pods(agent) == pods
    back = wait_until(
        lambda: (d := hub.get("/v1/discovered/east.ml.legacy-qwen"))["state"] == "tracked" and d,
        what="back in the inventory",
    )
    assert back["workload_id"] == ""


def test_promotion_needs_a_project_and_refuses_twice(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    setup(hub, agents, tmp_path)
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"])
    status, body = hub.rest("POST", "/v1/discovered/east.ml.legacy-qwen/promote", {}, check=False)
    assert (status, body["error"]["status"]) == (400, "INVALID_ARGUMENT")
    hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    status, body = hub.rest(
        "POST", "/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"}, check=False
    )
    assert (status, body["error"]["status"]) == (409, "FAILED_PRECONDITION")
    status, _ = hub.rest(
        "POST", "/v1/discovered/east.ml.nope/promote", {"project": "search"}, check=False
    )
    assert status == 404


def test_disabling_an_observed_deployment_deletes_nothing(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path)
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"])
    hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    wait_until(lambda: hub.get("/v1/deployments/legacy-qwen.east")["status"], what="reported")
    pods = worker_pods(agent)
    hub.patch("/v1/deployments/legacy-qwen.east", {"enabled": False})
    rounds = agent.agent.reconciles
    wait_until(lambda: agent.agent.reconciles >= rounds + 2, what="two reconciles")
    assert [d.name for d in agent.cluster.list_dgds()] == ["legacy-qwen"]
    assert worker_pods(agent) == pods


# -- taking control changes nothing unless the declaration does -----------------------------


def promoted(hub: Hub, agent: SimAgent, name: str = "legacy-qwen") -> str:
    """Promote the discovered DGD `name` to an observed deployment reported by the cluster."""
    wait_until(lambda: hub.get(f"/v1/discovered/east.ml.{name}")["device_class"])
    hub.post(f"/v1/discovered/east.ml.{name}/promote", {"project": "search"})
    ref = f"{name}.east"
    wait_until(lambda: hub.get(f"/v1/deployments/{ref}")["status"], what="reported")
    return ref


def settled(hub: Hub, agent: SimAgent, ref: str) -> dict[str, Any]:
    """The deployment after two more reconciles and reports of the agent."""
    rounds = agent.agent.reconciles
    wait_until(lambda: agent.agent.reconciles >= rounds + 2, what="two reconciles")
    return hub.get(f"/v1/deployments/{ref}")


def test_accepting_differences_with_no_engine_args_rolls_nothing_and_books_no_surge(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path)
    ref = promoted(hub, agent)
    before = worker_pods(agent)
    taken = hub.post(
        f"/v1/deployments/{ref}/authority", {"authority": "managed", "accept_differences": True}
    )
    assert taken["rollout"]["state"] == "converged"
    after = settled(hub, agent, ref)
    assert (after["rollout"]["state"], after["rollout"]["surge_replicas"]) == ("converged", 0)
    assert worker_pods(agent) == before, "no pod was restarted"
    assert agent.cluster.list_dgds()[0].labels["app.kubernetes.io/managed-by"] == "wingsmith-hangar"


def test_declaring_the_flags_a_managed_adopted_dgd_runs_rolls_nothing(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path)
    ref = promoted(hub, agent)
    hub.post(f"/v1/deployments/{ref}/authority", {"authority": "managed"})
    wait_until(lambda: agent.cluster.list_dgds()[0].labels.get("app.kubernetes.io/managed-by"))
    before = worker_pods(agent)
    changed = hub.patch("/v1/workloads/legacy-qwen", {"serving": {"engine_args": LEGACY_ARGS}})
    assert changed["deployments"][0]["generation"] == 2
    after = settled(hub, agent, ref)
    assert (after["rollout"]["state"], after["rollout"]["surge_replicas"], after["drift"]) == (
        "converged",
        0,
        [],
    )
    assert worker_pods(agent) == before


# -- disaggregated ---------------------------------------------------------------------------

DECODE_ARGS = ["--model", "Qwen/Qwen3-32B", "--tensor-parallel-size", "1"]


def disaggregated_dgd(name: str = "split-qwen", replicas: int = 2) -> dict[str, Any]:
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.9.1"

    def worker(sub: str, args: list[str]) -> dict[str, Any]:
        return {
            "componentType": "worker",
            "subComponentType": sub,
            "replicas": replicas,
            "resources": {"limits": {"gpu": "1"}},
            "extraPodSpec": {
                "mainContainer": {
                    "image": image,
                    "command": ["python3", "-m", "dynamo.vllm"],
                    "args": args,
                }
            },
        }

    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "backendFramework": "vllm",
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {"mainContainer": {"image": image}},
                },
                "VllmPrefillWorker": worker(
                    "prefill", [*DECODE_ARGS, "--disaggregation-mode", "prefill"]
                ),
                "VllmDecodeWorker": worker("decode", DECODE_ARGS),
            },
        },
    }


def test_a_disaggregated_adopted_dgd_counts_replicas_and_converges_after_new_flags(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path, disaggregated_dgd())
    found = wait_until(
        lambda: (d := hub.get("/v1/discovered/east.ml.split-qwen"))["ready_replicas"] == 2 and d,
        what="both sets ready",
    )
    assert (found["replicas"], found["devices_per_replica"]) == (2, 2)
    assert found["imported_args"] == DECODE_ARGS, "the decode worker's flags"
    ref = promoted(hub, agent, "split-qwen")
    observed = wait_until(
        lambda: (d := hub.get(f"/v1/deployments/{ref}"))["status"]["ready_replicas"] == 2 and d,
        what="two ready replicas",
    )
    assert observed["serving"]["mode"] == "disaggregated"
    assert observed["live_digests"] == {"unlabeled": 2}, "replicas, not pods (4 of them)"

    hub.post(f"/v1/deployments/{ref}/authority", {"authority": "managed"})
    before = worker_pods(agent)
    new_args = [*DECODE_ARGS, "--max-model-len", "8192"]
    hub.patch("/v1/workloads/split-qwen", {"serving": {"engine_args": new_args}})
    wait_until(lambda: not set(before) & set(worker_pods(agent)), what="prefill and decode rolled")
    done = wait_until(
        lambda: (
            (d := hub.get(f"/v1/deployments/{ref}"))["rollout"]["state"] == "converged"
            and d["live_digests"] == {d["serving_digest"]: 2}
            and d["status"]["ready_replicas"] == 2
            and d
        ),
        what="converged on the new digest",
    )
    assert done["drift"] == [] and done["rollout"]["surge_replicas"] == 0
    pods = [p for p in agent.cluster.list_pods() if "worker" in p.name]
    assert {p.labels["wingsmith.dev/serving-digest"] for p in pods} == {done["serving_digest"]}
    decode = [p for p in pods if "decode" in p.name]
    assert all(list(p.argv[-2:]) == ["--max-model-len", "8192"] for p in decode)


# -- shell-form containers -------------------------------------------------------------------


def shell_dgd(name: str = "shell-qwen") -> dict[str, Any]:
    manifest = legacy_dgd(name)
    container = manifest["spec"]["services"]["VllmDecodeWorker"]["extraPodSpec"]["mainContainer"]
    container["command"] = ["/bin/sh", "-c"]
    container["args"] = ["python3 -m dynamo.vllm " + " ".join(LEGACY_ARGS)]
    return manifest


def test_a_shell_form_container_yields_the_engine_flags_and_takes_new_ones(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path, shell_dgd())
    found = wait_until(
        lambda: (d := hub.get("/v1/discovered/east.ml.shell-qwen"))["device_class"] and d
    )
    assert found["imported_args"] == LEGACY_ARGS
    created = hub.post("/v1/discovered/east.ml.shell-qwen/promote", {"project": "search"})
    assert created["serving"]["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert created["serving"]["context_length"] == 16384
    ref = "shell-qwen.east"
    wait_until(lambda: hub.get(f"/v1/deployments/{ref}")["status"], what="reported")

    new_args = [*LEGACY_ARGS[:-1], "8192"]
    hub.patch("/v1/workloads/shell-qwen", {"serving": {"engine_args": new_args}})
    hub.post(
        f"/v1/deployments/{ref}/authority", {"authority": "managed", "accept_differences": True}
    )
    done = wait_until(
        lambda: (
            (d := hub.get(f"/v1/deployments/{ref}"))["rollout"]["state"] == "converged"
            and d["live_digests"] == {d["serving_digest"]: 2}
            and d
        ),
        what="rolled to the new flags",
    )
    assert done["drift"] == []
    assert hub.get(f"/v1/deployments/{ref}/review")["live_args"] == new_args
    pod = next(p for p in agent.cluster.list_pods() if "worker" in p.name)
    assert list(pod.argv) == ["/bin/sh", "-c", "python3 -m dynamo.vllm " + " ".join(new_args)]


def test_an_adopted_workload_stays_pinned_to_the_cluster_it_was_found_on(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    east = setup(hub, agents, tmp_path)
    west = agents(cluster_id="west", token=hub.register_cluster("west"))
    wait_until(lambda: hub.get("/v1/clusters/west")["devices"], what="west reported")
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"])
    hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    wait_until(lambda: hub.get("/v1/deployments/legacy-qwen.east")["status"], what="reported")
    pods = worker_pods(east)

    def refused_placements() -> None:
        for placement in (
            {"clusters": ["west"]},  # would delete the adopted DGD (or, observed, orphan it)
            {"clusters": ["east", "west"]},  # would render a second copy on west
            {"clusters": [], "cluster_selector": {"tier": "gpu"}},  # whichever clusters match
            {"clusters": ["east"], "topology": "node"},  # still a placement change
        ):
            status, body = hub.rest(
                "PATCH", "/v1/workloads/legacy-qwen", {"placement": placement}, check=False
            )
            assert (status, body["error"]["status"]) == (409, "FAILED_PRECONDITION"), placement
            message = body["error"]["message"]
            assert "adopted from cluster east and is pinned to it" in message, message
            assert "create a new workload" in message, message
        assert hub.get("/v1/workloads/legacy-qwen")["placement"]["clusters"] == ["east"]
        assert [d["cluster_id"] for d in hub.get("/v1/workloads/legacy-qwen")["deployments"]] == [
            "east"
        ]

    refused_placements()
    # Restating the placement it has is no change, and scaling stays on east.
    hub.patch("/v1/workloads/legacy-qwen", {"placement": {"clusters": ["east"]}, "replicas": 2})

    # Managed too: taking control changes nothing about where it lives.
    hub.patch("/v1/workloads/legacy-qwen", {"serving": {"engine_args": LEGACY_ARGS}})
    wait_until(lambda: not hub.get("/v1/deployments/legacy-qwen.east/review")["differences"])
    hub.post("/v1/deployments/legacy-qwen.east/authority", {"authority": "managed"})
    wait_until(lambda: east.cluster.list_dgds()[0].labels.get("app.kubernetes.io/managed-by"))
    refused_placements()

    rounds = east.agent.reconciles + west.agent.reconciles
    wait_until(
        lambda: east.agent.reconciles + west.agent.reconciles >= rounds + 4, what="reconciles"
    )
    assert [d.name for d in east.cluster.list_dgds()] == ["legacy-qwen"], "never deleted"
    assert worker_pods(east) == pods, "nothing restarted"
    assert west.cluster.list_dgds() == [], "never duplicated"


def test_disabling_a_managed_adopted_deployment_scales_it_to_zero_and_never_deletes_it(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    agent = setup(hub, agents, tmp_path)
    wait_until(lambda: hub.get("/v1/discovered/east.ml.legacy-qwen")["device_class"])
    hub.post("/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"})
    hub.patch("/v1/workloads/legacy-qwen", {"serving": {"engine_args": LEGACY_ARGS}})
    wait_until(lambda: hub.get("/v1/deployments/legacy-qwen.east")["status"], what="reported")
    wait_until(lambda: not hub.get("/v1/deployments/legacy-qwen.east/review")["differences"])
    hub.post("/v1/deployments/legacy-qwen.east/authority", {"authority": "managed"})
    wait_until(lambda: agent.cluster.list_dgds()[0].labels.get("app.kubernetes.io/managed-by"))
    frontend = agent.cluster.list_dgds()[0].spec["services"]["Frontend"]

    hub.patch("/v1/deployments/legacy-qwen.east", {"enabled": False})
    wait_until(lambda: not worker_pods(agent), what="workers gone, devices back")
    (kept,) = agent.cluster.list_dgds()
    assert kept.name == "legacy-qwen", "the adopted DGD is kept: it could not be made again"
    assert kept.spec["services"]["VllmDecodeWorker"]["replicas"] == 0
    assert kept.spec["services"]["Frontend"] == frontend
    wait_until(
        lambda: hub.get("/v1/projects/search")["usage"]["H100-80GB"]["used"] == 0,
        what="its devices released",
    )

    hub.patch("/v1/deployments/legacy-qwen.east", {"enabled": True})
    wait_until(lambda: len(worker_pods(agent)) == 2, what="running again from the same DGD")
    wait_until(
        lambda: hub.get("/v1/deployments/legacy-qwen.east")["admission_phase"] == "running",
        what="running",
    )
    assert [d.name for d in agent.cluster.list_dgds()] == ["legacy-qwen"]
