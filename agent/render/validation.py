"""Checks that a deployment can be expressed as a DGD, before anything is built.

Called once by `agent.render.dgd.render_dgd`. The hub validates and normalizes serving
configs too (hub/serving.py), but the agent must not trust that every hub version did, and
some limits are Kubernetes' or Dynamo's rather than the plane's (label syntax, name length):
those are only knowable here. Every check raises `errors.InvalidField` naming the field and
what would be accepted. Pure: no I/O, nothing but the values passed in.
"""

from __future__ import annotations

import math
import re

from agent.cluster import dgd_versions
from agent.model import ENGINES, MODES, ROUTER_MODES, DeploymentSpec, KvCache, Serving
from agent.render.errors import InvalidField, UnsupportedEngine

# The contract (resources.proto, Workload.name) caps workload names at 40 so that Dynamo's
# child names "<dgd>-<service>-<hash>" stay valid DNS labels.
MAX_WORKLOAD_NAME = 40
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_MAX_LABEL_VALUE = 63


def validate(spec: DeploymentSpec, *, namespace: str) -> None:
    """Raise a RenderError for the first thing the renderer cannot express."""
    _check_dns_label("namespace", namespace, limit=63)
    _check_dns_label("workload_name", spec.workload_name, limit=MAX_WORKLOAD_NAME)
    if spec.replicas < 0:
        raise InvalidField("replicas", f"must be >= 0, got {spec.replicas}")
    _check_label_values(spec)
    _check_serving(spec.serving)


def _check_serving(serving: Serving) -> None:
    if serving.engine not in ENGINES:
        raise UnsupportedEngine(serving.engine)
    _check_choice("serving.mode", serving.mode, MODES)
    _check_choice("serving.router_mode", serving.router_mode, ROUTER_MODES)
    if not serving.model:
        raise InvalidField("serving.model", "required: a model id such as Qwen/Qwen3-0.6B")
    _check_parallelism(serving)
    if serving.context_length < 0:
        raise InvalidField("serving.context_length", "must be >= 0 (0: the model's default)")
    _check_kv_cache(serving.kv_cache)
    if serving.mode == "disaggregated":
        _check_workers("serving.disaggregation.prefill_workers", serving.prefill_workers)
        _check_workers("serving.disaggregation.decode_workers", serving.decode_workers)
    if serving.runtime_version and not dgd_versions.RUNTIME_VERSION.match(serving.runtime_version):
        raise InvalidField(
            "serving.runtime_version",
            f"{serving.runtime_version!r} is not MAJOR.MINOR.PATCH (e.g. 1.5.0), the form"
            " Dynamo's runtimeVersionOverride takes",
        )
    for index, arg in enumerate(serving.engine_args):
        # An argv word is a C string: exec cannot pass a NUL, and Kubernetes rejects it.
        if "\x00" in arg:
            raise InvalidField(f"serving.engine_args[{index}]", "must not contain a NUL byte")


def _check_parallelism(serving: Serving) -> None:
    for field, value in (
        ("serving.tensor_parallel", serving.tensor_parallel),
        ("serving.pipeline_parallel", serving.pipeline_parallel),
        ("serving.expert_parallel", serving.expert_parallel),
    ):
        if value < 1:
            raise InvalidField(field, f"must be >= 1, got {value}")
    tp, ep = serving.tensor_parallel, serving.expert_parallel
    if tp % ep:
        choices = ", ".join(str(d) for d in range(1, tp + 1) if tp % d == 0)
        raise InvalidField(
            "serving.expert_parallel",
            f"{ep} does not divide tensor_parallel ({tp}): experts are spread over one "
            f"worker's devices; use one of {choices}",
        )


def _check_kv_cache(kv: KvCache) -> None:
    utilization = kv.gpu_memory_utilization
    # NaN fails every comparison, so it lands here too.
    if utilization != 0.0 and not (0.0 < utilization <= 1.0 and math.isfinite(utilization)):
        raise InvalidField(
            "serving.kv_cache.gpu_memory_utilization",
            f"must be in (0, 1], or 0 for the engine default; got {utilization!r}",
        )
    if kv.block_size < 0:
        raise InvalidField("serving.kv_cache.block_size", "must be >= 0 (0: engine default)")


def _check_workers(field: str, value: int) -> None:
    if value < 1:
        raise InvalidField(
            field, f"a disaggregated replica needs at least 1 worker of each role, got {value}"
        )


def _check_choice(field: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        shown = ", ".join(repr(c) for c in choices)
        raise InvalidField(field, f"unknown value {value!r}; use one of: {shown}")


def _check_dns_label(field: str, value: str, *, limit: int) -> None:
    if len(value) > limit or not _DNS_LABEL.match(value):
        raise InvalidField(
            field,
            f"{value!r} is not a DNS-1123 label of at most {limit} characters "
            "(lower-case letters, digits and '-', starting and ending alphanumeric)",
        )


def _check_label_values(spec: DeploymentSpec) -> None:
    # These become Kubernetes label values on every pod; the API server refuses the whole
    # DGD if one is malformed, so say which one here instead.
    for field, value in (
        ("deployment_id", spec.deployment_id),
        ("workload_id", spec.workload_id),
        ("serving_digest", spec.serving_digest),
        ("serving.engine_version", spec.serving.engine_version),
    ):
        if len(value) > _MAX_LABEL_VALUE or not _LABEL_VALUE.match(value):
            raise InvalidField(
                field,
                f"{value!r} cannot be a Kubernetes label value: at most 63 characters of "
                "letters, digits, '-', '_' and '.', starting and ending alphanumeric",
            )
