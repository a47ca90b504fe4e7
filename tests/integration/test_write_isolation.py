"""Writes that touch different things do not wait for each other (docs/architecture.md "Write
locks"), on two hubs sharing one PostgreSQL database.

A write for cluster `alpha` (project red) is made slow on purpose: another connection holds
alpha's row in the clusters table, as a long transaction would, so hub one's write of an
agent's connection to alpha waits for that row with whatever write locks it took. Meanwhile an
agent of cluster `beta` (project blue) connects to hub two and its deployment is admitted,
applied and reported ready: its session, leadership, ingest, admission and liveness writes are
not delayed. Once the row is let go, alpha's write completes. With one global write lock (the
old code) hub one's stuck write held it, and every write of beta waited behind it."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.harness import FAST, ApiError, Hub, start_agent, wait_until, workload
from tests.integration.test_no_write_on_the_loop import Inbox, node_stream
from tests.integration.test_several_hubs import hubs_on_one_database, ready

# Hub one's writer waits for as long as the row is held: it beats no heartbeat meanwhile, and
# must not be declared dead by hub two during the test.
PATIENT = dataclasses.replace(FAST, hub_dead_after_s=600.0)


@contextlib.contextmanager
def cluster_row_held(url: str, cluster_id: str) -> Iterator[psycopg.Connection[Any]]:
    """Cluster `cluster_id`'s row, locked by another transaction until the block ends."""
    with psycopg.connect(url) as conn:
        conn.execute("SELECT 1 FROM clusters WHERE cluster_id = %s FOR UPDATE", (cluster_id,))
        try:
            yield conn
        finally:
            conn.rollback()


def waiting_for_the_row(url: str) -> int:
    """Lock requests not granted (hub one's write, waiting for alpha's row)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
        return int(row[0]) if row else 0


def answered_while_alphas_write_waits(
    hub: Hub, alpha_token: str, url: str, calls: Sequence[tuple[str, Callable[[], Any]]]
) -> tuple[dict[str, Any], Inbox]:
    """Hold alpha's row, connect a node of alpha to `hub` (its write then waits with its locks
    taken), and make `calls` one after the other: each must be answered while that write
    still waits. Returns the answers by name, and alpha's stream, its write let go: the
    caller reads its welcome and closes it."""
    answers: dict[str, Any] = {}
    # The pool ends after the row is let go (the inner block): a call still waiting for
    # alpha (the covering lock) then completes, and the test fails rather than hangs.
    with (
        concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool,
        cluster_row_held(url, "alpha"),
    ):
        slow = node_stream(hub, alpha_token, "alpha", "a1")
        try:
            wait_until(lambda: waiting_for_the_row(url) >= 1, what="alpha's write waiting")
            # One after the other, each while alpha's write still waits.
            for what, call in calls:
                answer = pool.submit(call)
                wait_until(answer.done, timeout=30.0, what=f"{what} answered meanwhile")
                answers[what] = answer.result()
                assert waiting_for_the_row(url) >= 1, "alpha's write still waits"
            assert slow.kinds_so_far() == [], "alpha's connection still waits for its write"
        except BaseException:
            slow.stream.close()
            raise
    return answers, slow


def test_a_slow_write_for_one_cluster_does_not_delay_another_clusters_writes(
    tmp_path: Path,
) -> None:
    with hubs_on_one_database(tmp_path, 2, PATIENT) as (loop, (one, two), url):
        alpha = one.register_cluster("alpha")
        beta = two.register_cluster("beta")
        one.create_project("red", H100_80GB=16)
        two.create_project("blue", H100_80GB=16)
        one.post("/v1/workloads", workload("chat", project="red", clusters=("alpha",)))
        two.post("/v1/workloads", workload("search", project="blue", clusters=("beta",)))

        agent = None
        with cluster_row_held(url, "alpha"):
            slow = node_stream(one, alpha, "alpha", "a1")
            wait_until(lambda: waiting_for_the_row(url) >= 1, what="alpha's write waiting")
            try:
                agent = start_agent(loop, two, cluster_id="beta", token=beta)
                wait_until(
                    lambda: ready(two.get("/v1/deployments/search.beta")) == 1,
                    what="beta's agent connected, admitted, applied and ready on hub two",
                )
                admitted = two.get("/v1/deployments/search.beta")["admitted_replicas"]
                assert admitted == 1
                assert slow.kinds_so_far() == [], "alpha's connection still waits for its write"
            except BaseException:
                if agent is not None:
                    agent.stop()
                raise
        try:
            # Let go: alpha's write completes, and its stream is welcomed.
            assert slow.next("welcome").welcome is not None
            wait_until(
                lambda: one.get("/v1/clusters/alpha")["agents"], what="alpha's session recorded"
            )
        finally:
            slow.stream.close()
            if agent is not None:
                agent.stop()


def test_control_calls_for_one_project_do_not_wait_for_another_clusters_slow_write(
    tmp_path: Path,
) -> None:
    """While hub one's write for cluster alpha (project red) waits with its locks taken, hub
    two scales workload search of project blue on cluster beta, changes blue's quota,
    disables and enables search's deployment, and cordons and uncordons beta: each is scoped
    to beta's lock and blue's admission (docs/architecture.md "Write locks", per-path table),
    so none waits for alpha. Under the covering lock (the old code) each waited for alpha's
    write to let go."""
    with hubs_on_one_database(tmp_path, 2, PATIENT) as (_loop, (one, two), url):
        alpha = one.register_cluster("alpha")
        two.register_cluster("beta")
        one.create_project("red", H100_80GB=16)
        two.create_project("blue", H100_80GB=16)
        one.post("/v1/workloads", workload("chat", project="red", clusters=("alpha",)))
        two.post("/v1/workloads", workload("search", project="blue", clusters=("beta",)))

        calls: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("scale search", lambda: two.patch("/v1/workloads/search", {"replicas": 2})),
            (
                "change blue's quota",
                lambda: two.patch("/v1/projects/blue", {"quotas": {"H100-80GB": 8}}),
            ),
            ("disable", lambda: two.patch("/v1/deployments/search.beta", {"enabled": False})),
            ("enable", lambda: two.patch("/v1/deployments/search.beta", {"enabled": True})),
            ("cordon beta", lambda: two.post("/v1/clusters/beta:cordon", {})),
            ("uncordon beta", lambda: two.post("/v1/clusters/beta:uncordon", {})),
        ]
        answers, slow = answered_while_alphas_write_waits(one, alpha, url, calls)
        try:
            assert answers["scale search"]["replicas"] == 2
            assert answers["change blue's quota"]["quotas"]["H100-80GB"] == 8
            assert answers["disable"]["enabled"] is False
            assert answers["enable"]["enabled"] is True
            assert answers["cordon beta"]["cordoned"] is True
            assert answers["uncordon beta"]["cordoned"] is False
            # Alpha's write completes once let go.
            assert slow.next("welcome").welcome is not None
        finally:
            slow.stream.close()


def test_a_workload_create_and_rollout_controls_do_not_wait_for_another_clusters_slow_write(
    tmp_path: Path,
) -> None:
    """While hub one's write for cluster alpha (project red) waits with its locks taken, hub
    two creates a workload of project blue on cluster beta, creates and deletes project
    green, and pauses, resumes and aborts the rollout in waves of another workload of blue on
    beta: the workload create is scoped to the clusters its placement may choose and blue's
    project lock, the project create and delete to green's lock, the rollout calls to the
    workload's deployments' clusters (docs/architecture.md "Write locks", per-path table), so
    none waits for alpha. Under the covering lock (the old code) each waited for alpha."""
    with hubs_on_one_database(tmp_path, 2, PATIENT) as (loop, (one, two), url):
        alpha = one.register_cluster("alpha")
        beta = two.register_cluster("beta")
        one.create_project("red", H100_80GB=16)
        two.create_project("blue", H100_80GB=32)
        one.post("/v1/workloads", workload("chat", project="red", clusters=("alpha",)))
        # Beta's pods never get ready: the rollout below stays in flight (rolling).
        agent = start_agent(
            loop,
            two,
            cluster_id="beta",
            token=beta,
            spec="nodes=1,gpus=8,class=H100-80GB,ready_after=600s",
        )
        try:
            body = workload("roll", project="blue", clusters=("beta",))
            body["rollout"] = {"max_clusters_in_flight": 1, "wave_deadline_seconds": 600}
            two.post("/v1/workloads", body)
            wait_until(
                lambda: two.get("/v1/deployments/roll.beta")["admitted_replicas"] == 1,
                what="roll admitted on beta",
            )
            changed = two.patch("/v1/workloads/roll", {"serving": {"engine_version": "0.11.1"}})
            assert changed["rollout_status"]["state"] == "rolling"

            calls: list[tuple[str, Callable[[], dict[str, Any]]]] = [
                (
                    "create fresh",
                    lambda: two.post(
                        "/v1/workloads", workload("fresh", project="blue", clusters=("beta",))
                    ),
                ),
                ("create project green", lambda: two.create_project("green", H100_80GB=8)),
                ("delete project green", lambda: two.rest("DELETE", "/v1/projects/green")[1]),
                ("pause roll", lambda: two.post("/v1/workloads/roll:pause", {})),
                ("resume roll", lambda: two.post("/v1/workloads/roll:resume", {})),
                ("abort roll", lambda: two.post("/v1/workloads/roll:abort", {})),
            ]
            answers, slow = answered_while_alphas_write_waits(one, alpha, url, calls)
            try:
                assert answers["create fresh"]["name"] == "fresh"
                assert [d["cluster_id"] for d in answers["create fresh"]["deployments"]] == ["beta"]
                assert answers["create project green"]["name"] == "green"
                with pytest.raises(ApiError) as gone:
                    two.get("/v1/projects/green")
                assert gone.value.status == 404
                assert answers["pause roll"]["rollout_status"]["state"] == "paused"
                assert answers["resume roll"]["rollout_status"]["state"] == "rolling"
                assert answers["abort roll"]["rollout_status"]["state"] == "aborted"
                # Alpha's write completes once let go.
                assert slow.next("welcome").welcome is not None
            finally:
                slow.stream.close()
        finally:
            agent.stop()
