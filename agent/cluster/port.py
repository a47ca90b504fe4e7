"""The port every cluster backend implements: the simulated cluster and the Kubernetes adapter.

The agent's reconciler and observer talk to a cluster only through `ClusterPort`. Values
crossing it are plain frozen dataclasses and plain dicts (DGD manifests as Kubernetes would
serialize them), so the agent core never sees a Kubernetes client object.

Calls are synchronous: the Kubernetes client is, and the agent runs them off the event loop
(asyncio.to_thread) where they can block. `revision()` lets the observer skip work when
nothing changed: it increases whenever anything a list_* call returns may have changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

# Labels the renderer puts on the DGD and every pod it causes (agent/render).
LABEL_DEPLOYMENT_ID = "wingsmith.dev/deployment-id"
LABEL_SERVING_DIGEST = "wingsmith.dev/serving-digest"
LABEL_WORKLOAD = "wingsmith.dev/workload"
LABEL_ENGINE_VERSION = "wingsmith.dev/engine-version"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "wingsmith-hangar"

# Labels Dynamo puts on the pods it creates (shared/reference/dynamo-dgd.md).
DYNAMO_GRAPH = "nvidia.com/dynamo-graph-deployment-name"
DYNAMO_COMPONENT_TYPE = "nvidia.com/dynamo-component-type"
DYNAMO_SUB_COMPONENT_TYPE = "nvidia.com/dynamo-sub-component-type"
DYNAMO_COMPONENT = "nvidia.com/dynamo-component"
DYNAMO_NAMESPACE = "nvidia.com/dynamo-namespace"
DYNAMO_SELECTOR = "nvidia.com/selector"
DYNAMO_WORKER_HASH = "nvidia.com/dynamo-worker-hash"

DGD_GROUP = "nvidia.com"
# The version of the agent's internal form of a DGD (agent/cluster/dgd_versions.py); what the
# API server is written in is each backend's `dgd_version`.
DGD_VERSION = "v1alpha1"
DGD_PLURAL = "dynamographdeployments"
DGD_KIND = "DynamoGraphDeployment"
DGDSA_PLURAL = "dynamographdeploymentscalingadapters"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: Mapping[str, str]
    # Empty while unscheduled.
    node_name: str
    # Kubernetes pod phase: Pending | Running | Succeeded | Failed.
    phase: str
    ready: bool
    # nvidia.com/gpu requested by the main container.
    gpu_request: int
    image: str = ""
    # The main container's command + args, as the engine sees its argv.
    argv: tuple[str, ...] = ()
    # Why it is not running, e.g. "Unschedulable: insufficient nvidia.com/gpu".
    reason: str = ""
    created_unix: float = 0.0


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    # status.allocatable["nvidia.com/gpu"]
    allocatable_gpus: int = 0


@dataclass(frozen=True)
class Dgd:
    """A DynamoGraphDeployment as read from the cluster."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    generation: int = 1
    annotations: Mapping[str, str] = field(default_factory=dict)
    # metadata.resourceVersion where the backend has one ("" in the simulated cluster): an
    # apply that takes fields over is made conditional on it (ClusterPort.apply_dgd).
    resource_version: str = ""
    # Field managers other than this agent that own spec fields besides replicas (managedFields:
    # a `kubectl edit` of an env var merges into our DGD without a conflict; docs/kubernetes.md,
    # "Drift"); sorted, empty where the backend has no field ownership.
    foreign_managers: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScalingAdapter:
    """A DynamoGraphDeploymentScalingAdapter: where a DGD component's replicas are set when
    the component opts into the adapter (its spec.replicas is the source of truth)."""

    namespace: str
    name: str
    dgd_name: str
    component: str
    replicas: int
    # The field manager that last set spec.replicas through the /scale subresource, other than
    # this agent: an HPA, KEDA, `kubectl scale`. "" when none did: replicas are ours to set.
    autoscaler: str = ""


class ClusterError(Exception):
    """A cluster call failed; `retryable` says whether trying again later may help."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class ReadOnlyViolation(ClusterError):
    """A mutating call reached a cluster backend opened read-only."""

    def __init__(self, operation: str) -> None:
        super().__init__(f"read-only mode: refused {operation}", retryable=False)


# ClusterPort.dgd_version when the API server serves no DGD version the agent can write.
DGD_VERSION_NONE = "none"


class ClusterPort(Protocol):
    def revision(self) -> int: ...

    @property
    def dgd_version(self) -> str:
        """The DGD API version the backend writes ("v1beta1" or "v1alpha1"; manifests cross
        the port in the internal form either way: agent/cluster/dgd_versions.py);
        DGD_VERSION_NONE when the API server serves neither; "" while not known yet."""
        ...

    def list_dgds(self) -> list[Dgd]: ...

    def list_pods(self) -> list[Pod]: ...

    def list_nodes(self) -> list[Node]: ...

    def apply_dgd(self, manifest: Mapping[str, Any], *, take_over: str = "") -> None:
        """Create or update (server-side apply semantics: only our fields are ours).

        `take_over`: the resourceVersion of the live DGD the manifest was made from, for a DGD
        the user handed to Wingsmith (an adopted one, taken under management): the fields the
        manifest changes are taken from whoever set them (forced), and only if the DGD is still
        at that version (else a retryable error: the next pass starts from what is there now).
        Empty: nothing is taken from anyone; a field another manager set otherwise is refused."""
        ...

    def delete_dgd(self, namespace: str, name: str) -> None:
        """Delete; deleting what is not there is not an error."""
        ...

    def list_scaling_adapters(self) -> list[ScalingAdapter]:
        """The scaling adapters of the DGDs this backend sees ([] where Dynamo has none)."""
        ...

    def scale_adapter(self, namespace: str, name: str, replicas: int) -> None:
        """Set an adapter's replicas through its /scale subresource."""
        ...
