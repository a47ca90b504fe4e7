"""Adoption: what a discovered DynamoGraphDeployment runs, as a serving config. Pure.

Called by hub/service/adoption.py when a discovered workload is promoted. The agent reported
the DGD's backend, worker services (replicas, GPUs per pod, image) and the worker's args
(imported_args); this module reads the serving config off them (docs/adoption.md):

- engine: the DGD's backendFramework;
- model, parallelism, context length, quantization, KV cache settings: from the engine flags
  ("--flag value" and "--flag=value", the spellings of vLLM, SGLang and TRT-LLM). The agent
  sends the flags already taken out of any `sh -c` script; a one-string command line (from an
  older agent: `["python3 -m dynamo.vllm --model X"]`, or a whole `sh -c` argv) is split into
  words here too (shlex), so its flags are found;
- devices per worker: the worker pod's GPU request is the truth (it is what the cluster
  allocates); when the flags disagree, tensor_parallel is set from the GPUs so that the
  accounting matches what runs;
- disaggregated when the DGD has prefill and decode workers; a replica is one set of them,
  laid out as the agent renders one (gcd of the two pod counts sets, each of prefill/sets
  prefill and decode/sets decode workers), and its devices are those workers' GPU requests
  together (`Shape.devices_per_replica`): what the promoted deployment is charged, the same
  footprint that runs, even where prefill and decode workers request different GPU counts;
- engine_args are left empty: asserting flags as desired state is the user's decision
  (imported_args keeps what was read).
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from hub.model import ENGINES, DiscoveredObservation, DiscoveredService, KvCache, Serving

_FLAGS = {
    "model": ("--model", "--model-path", "--model-name"),
    "tensor_parallel": ("--tensor-parallel-size", "--tp", "--tp-size"),
    "pipeline_parallel": ("--pipeline-parallel-size", "--pp", "--pp-size"),
    "expert_parallel": ("--ep-size", "--expert-parallel-size"),
    "context_length": ("--max-model-len", "--context-length", "--max-seq-len"),
    "quantization": ("--quantization",),
    "kv_dtype": ("--kv-cache-dtype",),
    "memory": ("--gpu-memory-utilization", "--mem-fraction-static", "--free-gpu-memory-fraction"),
    "block_size": ("--block-size", "--page-size", "--kv-block-size"),
}
_VERSION = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?\Z")
_WORKER_TYPES = frozenset({"worker", "prefill", "decode"})
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "zsh"})


@dataclass(frozen=True)
class Shape:
    """How many replicas a discovered DGD runs, and the workers of one replica."""

    replicas: int
    mode: str
    prefill_workers: int = 1
    decode_workers: int = 1
    gpus_per_worker: int = 0
    # GPUs per prefill worker (disaggregated; gpus_per_worker is the decode worker's).
    gpus_per_prefill_worker: int = 0
    ready_replicas: int = 0

    @property
    def devices_per_replica(self) -> int:
        """Every GPU the workers of one replica request."""
        if self.mode == "disaggregated":
            return (
                self.prefill_workers * self.gpus_per_prefill_worker
                + self.decode_workers * self.gpus_per_worker
            )
        return self.gpus_per_worker


def flag(args: Sequence[str], names: Sequence[str]) -> str | None:
    """The value of the first of `names` in args ("--x v" or "--x=v"); "" for a bare flag."""
    for index, arg in enumerate(args):
        name, sep, value = arg.partition("=")
        if name not in names:
            continue
        if sep:
            return value
        following = args[index + 1] if index + 1 < len(args) else ""
        return "" if following.startswith("--") else following
    return None


def words(args: Sequence[str]) -> list[str]:
    """The engine's words: `args` as they are, except that a shell's `-c` script and a lone
    command line with spaces are split as a shell would (quotes kept together)."""
    result: list[str] = []
    for index, arg in enumerate(args):
        script = index > 0 and args[index - 1].startswith("-") and "c" in args[index - 1][1:]
        shell = script and os.path.basename(args[0]) in _SHELLS
        if (shell or len(args) == 1) and any(c.isspace() for c in arg):
            try:
                result.extend(shlex.split(arg, comments=True))
                continue
            except ValueError:
                pass  # unbalanced quotes: keep the word whole
        result.append(arg)
    return result


def shape(observation: DiscoveredObservation) -> Shape:
    workers = [s for s in observation.services if s.component_type in _WORKER_TYPES]
    prefill = [s for s in workers if _role(s) == "prefill"]
    decode = [s for s in workers if _role(s) == "decode"]
    if prefill and decode:
        p, d = prefill[0], decode[0]
        sets = math.gcd(p.replicas, d.replicas) or 1
        per_prefill, per_decode = max(1, p.replicas // sets), max(1, d.replicas // sets)
        return Shape(
            replicas=sets if p.replicas and d.replicas else 0,
            mode="disaggregated",
            prefill_workers=per_prefill,
            decode_workers=per_decode,
            gpus_per_worker=d.gpus_per_pod,
            gpus_per_prefill_worker=p.gpus_per_pod,
            ready_replicas=min(p.ready_replicas // per_prefill, d.ready_replicas // per_decode),
        )
    main = workers[0] if workers else None
    return Shape(
        replicas=main.replicas if main else observation.replicas,
        mode="aggregated",
        gpus_per_worker=main.gpus_per_pod if main else observation.devices_per_replica,
        ready_replicas=main.ready_replicas if main else observation.ready_replicas,
    )


def serving_of(observation: DiscoveredObservation) -> Serving:
    """The serving config a discovered DGD runs (raw: hub.serving.normalize checks it)."""
    args = words(observation.imported_args)
    found = {key: flag(args, names) for key, names in _FLAGS.items()}
    the_shape = shape(observation)
    tp = _int(found["tensor_parallel"], 1)
    pp = _int(found["pipeline_parallel"], 1)
    if the_shape.gpus_per_worker and tp * pp != the_shape.gpus_per_worker:
        # The GPU request is what the cluster allocates: make the accounting match it.
        pp = pp if the_shape.gpus_per_worker % pp == 0 else 1
        tp = the_shape.gpus_per_worker // pp
    ep = _int(found["expert_parallel"], 1)
    if flag(args, ("--enable-expert-parallel",)) is not None:
        ep = tp
    return Serving(
        engine=_engine(observation),
        engine_version=engine_version(observation),
        model=found["model"] or observation.name,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        expert_parallel=ep if ep and tp % ep == 0 else 1,
        context_length=_int(found["context_length"], 0),
        quantization=(found["quantization"] or "").lower(),
        kv_cache=KvCache(
            dtype=(found["kv_dtype"] or "").lower(),
            gpu_memory_utilization=_float(found["memory"]),
            block_size=_int(found["block_size"], 0),
            disable_prefix_caching=flag(args, ("--no-enable-prefix-caching",)) is not None,
        ),
        engine_args=(),
        mode=the_shape.mode,
        prefill_workers=the_shape.prefill_workers,
        decode_workers=the_shape.decode_workers,
    )


def engine_version(observation: DiscoveredObservation) -> str:
    """As the agent reported it (a label, or the image tag); "unknown" when neither says."""
    version = observation.engine_version
    return version if _VERSION.match(version or "") else "unknown"


def _engine(observation: DiscoveredObservation) -> str:
    framework = observation.backend_framework.lower()
    if framework in ENGINES:
        return framework
    images = " ".join(s.image for s in observation.services)
    for engine, marker in (("vllm", "vllm"), ("sglang", "sglang"), ("trtllm", "tensorrtllm")):
        if marker in images:
            return engine
    return framework or "vllm"


def _role(service: DiscoveredService) -> str:
    for role in (service.sub_component_type, service.component_type):
        if role in ("prefill", "decode"):
            return role
    name = service.name.lower()
    return "prefill" if "prefill" in name else "decode" if "decode" in name else "worker"


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value else default
    except ValueError:
        return default


def _float(value: str | None) -> float:
    try:
        number = float(value) if value else 0.0
    except ValueError:
        return 0.0
    return number if 0.0 <= number <= 1.0 else 0.0
