"""The agent's domain values: desired deployments as the agent sees them.

Converted from `wingsmith.v1.DeploymentSpec` at the sync edge (agent/sync/convert.py); the
renderer, the reconciler and the observer work only with these frozen dataclasses, never with
protobuf messages. Enum-like fields hold the lower-case words of the design ("vllm",
"aggregated", "managed").
"""

from __future__ import annotations

from dataclasses import dataclass

# The serving configuration is one type for hub and agent (common/serving.py).
from common.serving import KvCache as KvCache
from common.serving import Serving as Serving

ENGINES = ("vllm", "sglang", "trtllm")
MODES = ("aggregated", "disaggregated")
AUTHORITIES = ("managed", "observed")
ROUTER_MODES = ("", "round_robin", "kv")


@dataclass(frozen=True)
class DeploymentSpec:
    """One deployment the hub wants on this cluster (DeploymentSpec in sync.proto)."""

    deployment_id: str
    name: str
    workload_id: str
    workload_name: str
    project: str
    replicas: int
    admitted: bool
    enabled: bool
    authority: str
    serving: Serving
    generation: int
    serving_digest: str
    device_class: str
    devices_per_replica: int
    revision: int = 0
    # Extra replicas admitted for a rollout (old and new side by side up to replicas + surge).
    surge_replicas: int = 0
    # An adopted DGD's coordinates; empty for the agent's own (named after the workload).
    dgd_namespace: str = ""
    dgd_name: str = ""
    adopted: bool = False

    @property
    def should_run(self) -> bool:
        """The agent may run it: admitted, enabled and managed."""
        return self.admitted and self.enabled and self.authority == "managed"

    def workers_of(self, role: str) -> int:
        """Worker pods of one role in one replica (role: worker, prefill or decode)."""
        if role == "prefill":
            return self.serving.prefill_workers
        if role == "decode" and self.serving.mode == "disaggregated":
            return self.serving.decode_workers
        return 1
