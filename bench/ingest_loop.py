"""The event loop's time per incoming observation batch: validated on the loop, or handed to the
validation thread (hub/sync/offloop.py), in-process.

    python -m bench.ingest_loop [--streams 2000] [--batches 5] [--kind rollout|nodes]

What is measured: `--streams` coroutines stand for as many agent streams' readers, each
handling `--batches` observation batches one after the other as the hub's reader does (a
Checker with the hub's clock, the batch validated and converted, then the next message),
all at once, as after a fleet-wide change. The figure is the CPU time of the loop's own thread
(`time.thread_time`, which the machine's load does not move, unlike wall time) per batch, less
the same coroutines' cost with no validation at all (the harness's share), for:

- `loop`: `convert.observations` called on the loop (the hub before issue 23);
- `thread`: awaited from the validation thread (`Validator.observations`, the hub now); the
  thread's own CPU is given beside it (the validation itself, moved, not removed: it still
  shares the GIL with the loop, but the loop gets it back every switch interval instead of
  waiting for a whole burst of reports).

Batches (the shapes the bench's simulated agents send, bench/scenarios.py): `rollout` is one
deployment's report with 8 replicas and a status (what every agent sends after a fleet-wide
change, the fan-out phase); `nodes` is a full node report, 8 nodes of 8 GPUs with allocations
(the connect phase's first report).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable, Sequence

from hub.model import ObservationBatch
from hub.sync import convert
from hub.sync.offloop import Validator
from wingsmith.v1 import resources_pb2, sync_pb2

SKEW_NS = 5 * 10**9
TICK_S = 0.001
DIGEST = "svg_0123456789abcdef"


def rollout_batch(stream: int, seq: int) -> sync_pb2.ObservationBatch:
    now = time.time_ns()
    replicas = [
        sync_pb2.ReplicaReport(
            name=f"chat-worker-{r}",
            namespace="wingsmith",
            node_id=f"c{stream:05d}-n{r}",
            ready=True,
            serving_digest=DIGEST,
            engine_version="0.4.1",
            role="worker",
        )
        for r in range(8)
    ]
    status = sync_pb2.DeploymentStatusReport(
        phase="Ready", ready_replicas=8, desired_replicas=8, applied_generation=seq
    )
    deployment = sync_pb2.DeploymentObservation(
        deployment_id=f"dep_{stream:016x}", observe_unix_nanos=now, status=status, replicas=replicas
    )
    return sync_pb2.ObservationBatch(seq=seq, deployments=[deployment])


def nodes_batch(stream: int, seq: int) -> sync_pb2.ObservationBatch:
    now = time.time_ns()
    nodes = []
    for n in range(8):
        uuids = [f"GPU-{stream:08x}-{n:04x}-4b6a-9c2e-{g:012x}" for g in range(8)]
        devices = [
            resources_pb2.Device(
                uuid=uuid,
                name="NVIDIA H100 80GB HBM3",
                memory_bytes=80 * 2**30,
                pci_bus_id=f"00000000:{g + 16:02x}:00.0",
                device_class="H100-80GB",
                healthy=True,
                verified=True,
            )
            for g, uuid in enumerate(uuids)
        ]
        allocations = [
            sync_pb2.AllocationReport(
                pod_name=f"chat-worker-{a}",
                namespace="wingsmith",
                device_ids=uuids[a * 4 : a * 4 + 4],
                resource_name="nvidia.com/gpu",
            )
            for a in range(2)
        ]
        nodes.append(
            sync_pb2.NodeObservation(
                node_id=f"c{stream:05d}-n{n}",
                observe_unix_nanos=now,
                devices=devices,
                allocations=allocations,
            )
        )
    return sync_pb2.ObservationBatch(seq=seq, nodes=nodes)


KINDS: dict[str, Callable[[int, int], sync_pb2.ObservationBatch]] = {
    "rollout": rollout_batch,
    "nodes": nodes_batch,
}

Validate = Callable[[sync_pb2.ObservationBatch, convert.Checker], Awaitable[ObservationBatch]]


async def _inline(message: sync_pb2.ObservationBatch, check: convert.Checker) -> ObservationBatch:
    return convert.observations(message, check)


async def _none(message: sync_pb2.ObservationBatch, check: convert.Checker) -> ObservationBatch:
    return ObservationBatch(seq=message.seq)


def _run(validate: Validate, batches: list[list[sync_pb2.ObservationBatch]]) -> dict[str, float]:
    """Loop-thread CPU, whole-process CPU and wall time for every stream's batches."""

    async def reader(stream: list[sync_pb2.ObservationBatch]) -> None:
        for message in stream:
            check = convert.Checker(now_ns=time.time_ns(), max_skew_ns=SKEW_NS)
            batch = await validate(message, check)
            assert batch.seq == message.seq
            await asyncio.sleep(0)  # the next message from gRPC

    lags: list[float] = []

    async def ticker() -> None:
        # How late a 1 ms timer fires: how long anything else on the loop (a stream's send)
        # waits while the batches are validated.
        while True:
            due = time.perf_counter() + TICK_S
            await asyncio.sleep(TICK_S)
            lags.append(time.perf_counter() - due)

    async def main() -> tuple[float, float, float]:
        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        loop_cpu, cpu, wall = time.thread_time(), time.process_time(), time.perf_counter()
        await asyncio.gather(*(reader(stream) for stream in batches))
        figures = (
            time.thread_time() - loop_cpu,
            time.process_time() - cpu,
            time.perf_counter() - wall,
        )
        ticking.cancel()
        return figures

    loop_cpu, cpu, wall = asyncio.run(main())
    count = sum(len(stream) for stream in batches)
    lags.sort()
    return {
        "loop_cpu_us": loop_cpu / count * 1e6,
        "cpu_us": cpu / count * 1e6,
        "wall_s": wall,
        "lag_p99_ms": lags[int(len(lags) * 0.99)] * 1e3 if lags else 0.0,
        "lag_max_ms": lags[-1] * 1e3 if lags else 0.0,
    }


def measure(streams: int, per_stream: int, kind: str, repeat: int) -> dict[str, object]:
    make = KINDS[kind]
    batches = [[make(s, seq) for seq in range(1, per_stream + 1)] for s in range(streams)]
    validator = Validator()
    # Both ways give the same records (the figures compare the same work).
    check = convert.Checker(now_ns=time.time_ns(), max_skew_ns=SKEW_NS)
    same = asyncio.run(validator.observations(batches[0][0], check))
    assert same == convert.observations(batches[0][0], check), "the two ways differ"
    runs: dict[str, list[dict[str, float]]] = {"none": [], "loop": [], "thread": []}
    try:
        for _ in range(repeat):
            runs["none"].append(_run(_none, batches))
            runs["loop"].append(_run(_inline, batches))
            runs["thread"].append(_run(validator.observations, batches))
    finally:
        validator.close()
    # The minimum of the repeats: what the work costs when nothing else took the core.
    best = {mode: min(r, key=lambda x: x["loop_cpu_us"]) for mode, r in runs.items()}
    harness = best["none"]["loop_cpu_us"]
    result: dict[str, object] = {
        "streams": streams,
        "batches_per_stream": per_stream,
        "kind": kind,
        "load_average": os.getloadavg(),
        "harness_loop_cpu_us": round(harness, 2),
    }
    for mode in ("loop", "thread"):
        result[mode] = {
            "loop_cpu_us_per_batch": round(best[mode]["loop_cpu_us"] - harness, 2),
            "process_cpu_us_per_batch": round(best[mode]["cpu_us"] - best["none"]["cpu_us"], 2),
            "wall_s": round(best[mode]["wall_s"], 3),
            "timer_lag_p99_ms": round(best[mode]["lag_p99_ms"], 2),
            "timer_lag_max_ms": round(best[mode]["lag_max_ms"], 2),
        }
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest_loop", description=__doc__)
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=5, help="batches per stream")
    parser.add_argument("--kind", choices=sorted(KINDS), default="rollout")
    parser.add_argument("--repeat", type=int, default=5)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    assert threading.current_thread() is threading.main_thread()
    print(json.dumps(measure(args.streams, args.batches, args.kind, args.repeat), indent=2))


if __name__ == "__main__":
    main()
