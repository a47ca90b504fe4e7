"""Reconcile: desired deployments vs the DGDs in the cluster -> what to apply and delete. Pure.

Rules (docs/authority.md, docs/rollouts.md):
- only `managed` deployments are ever written; an `observed` one is left exactly as it is,
  with one exception: when a deployment is demoted, the DGD still carries our managed-by label,
  and the agent removes that label (DGD metadata only, the pod template is untouched) so that
  nothing it does later can delete or change the DGD;
- a managed deployment that should run (admitted, enabled) is either
  - *rendered* (the agent's own): the renderer's DGD, plus the rollout's surge limit; or
  - *adopted* (taken over from a DGD someone else made): the live DGD, kept as it is, with
    only what the hub declares enforced: the workers' replicas, and engine_args as the main
    worker's engine flags once set (launcher and any shell wrapper kept). Our labels go on the
    DGD's metadata only, so taking control of a DGD whose config matches changes nothing in its
    pod template and Dynamo rolls nothing. When the flags do change the template, Dynamo's
    worker hash covers every worker, so every worker restarts: every worker's pods get our
    digest labels, so that the rollout can be followed to its end;
- it is applied when the cluster's DGD is missing or was made from something else (the
  spec-hash annotation differs: comparing hashes, not specs, ignores what the API server
  defaults);
- a DGD carrying our deployment-id label whose deployment the hub no longer declares is
  - *forgotten* when the hub released it (the deployment was observed when it was deleted),
    when the agent last held it as observed, or when it was adopted and the hub said nothing
    (a snapshot after a long absence): our labels and annotations come off its metadata and it
    runs on, to be discovered again. Demoting and deleting an observed deployment never delete
    anything, whatever order the agent hears of them in;
  - deleted when it is a managed DGD of ours otherwise (removed, disabled or no longer
    admitted: its devices go back). DGDs we do not manage are never deleted;
- an adopted DGD is the cluster's own object: disabled or no longer admitted, its workers are
  scaled to zero (its devices go back, its pod template stays for when it runs again), never
  deleted; only the user deleting its workload while managed deletes it;
- a deployment that cannot be rendered, whose DGD name is taken by a DGD that is not ours, or
  whose adopted DGD is gone, fails (the agent rejects it on the stream); what runs stays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any

from agent.cluster import dgd_versions, port
from agent.devices.classes import NO_OVERRIDES
from agent.manifests import (
    ANNOTATION_ADOPTED,
    ANNOTATION_SPEC_HASH,
    Refused,
    adopted,
    forgotten,
    released_dgd,
    rendered,
)
from agent.model import DeploymentSpec
from agent.render.dgd import RenderError


@dataclass(frozen=True)
class Apply:
    deployment_id: str
    generation: int
    manifest: Mapping[str, Any]
    # Letting go of a DGD whose deployment the hub no longer declares: a failure has no
    # deployment to be reported on (the agent retries on the next pass).
    letting_go: bool = False
    # An adopted DGD under management: the resourceVersion of the live DGD the manifest was
    # made from; the apply takes what it changes from the DGD's other managers
    # (ClusterPort.apply_dgd). Promoting an adopted deployment to managed is that decision.
    take_over: str = ""


@dataclass(frozen=True)
class Delete:
    namespace: str
    name: str
    deployment_id: str
    # Set when the DGD is deleted to be created again: why it cannot change in place.
    recreate: str = ""


@dataclass(frozen=True)
class Failure:
    deployment_id: str
    generation: int
    error: str


@dataclass(frozen=True)
class Scale:
    """Set a scaling adapter's replicas (its /scale subresource): how replicas change for a
    DGD component that opted into the adapter and no autoscaler drives."""

    namespace: str
    name: str
    replicas: int
    deployment_id: str
    generation: int = 0


@dataclass(frozen=True)
class Plan:
    applies: tuple[Apply, ...] = ()
    deletes: tuple[Delete, ...] = ()
    failures: tuple[Failure, ...] = ()
    scales: tuple[Scale, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.applies or self.deletes or self.scales)


def ours(dgd: port.Dgd) -> str:
    """The deployment id of a DGD this agent manages, or ""."""
    if dgd.labels.get(port.LABEL_MANAGED_BY) != port.MANAGED_BY:
        return ""
    return dgd.labels.get(port.LABEL_DEPLOYMENT_ID, "")


def dgd_of(spec: DeploymentSpec, live: Sequence[port.Dgd]) -> port.Dgd | None:
    """The deployment's DGD in the cluster: by its recorded coordinates (adopted), else by our
    deployment-id label (which stays on a demoted DGD)."""
    if spec.dgd_name:
        return next(
            (d for d in live if (d.namespace, d.name) == (spec.dgd_namespace, spec.dgd_name)),
            None,
        )
    return next(
        (d for d in live if d.labels.get(port.LABEL_DEPLOYMENT_ID) == spec.deployment_id), None
    )


def plan(
    desired: Mapping[str, DeploymentSpec],
    live: Sequence[port.Dgd],
    *,
    namespace: str,
    images: Mapping[str, str] | None = None,
    released: Set[str] = frozenset(),
    removed: Set[str] = frozenset(),
    nodes: Sequence[port.Node] = (),
    class_overrides: Mapping[str, str] = NO_OVERRIDES,
    dgd_version: str = "",
    adapters: Sequence[port.ScalingAdapter] = (),
) -> Plan:
    """`released`: ids the hub no longer declares whose DGD stays; `removed`: ids the hub
    deleted while they were managed (agent/desired.py keeps both); `nodes`: the cluster's,
    whose GPU labels the rendered workers' node affinity matches (agent/render/placement.py).
    `dgd_version`: what the cluster backend writes (ClusterPort.dgd_version): under v1beta1 a
    change the operator's webhook forbids in place is a delete now and a create once the DGD
    is gone; where no version is served, every deployment to apply fails with the reason.
    `adapters`: the cluster's scaling adapters: a component that opted into one keeps its live
    replicas in what is applied (the operator's webhook refuses any other), and its replicas
    change through the adapter, unless an autoscaler drives it (then not at all)."""
    target = _Target(
        namespace=namespace,
        images=images,
        nodes=nodes,
        overrides=class_overrides,
        operator_version=dgd_versions.operator_version(d.annotations for d in live),
    )
    applies, failures = [], []
    recreates: list[Delete] = []
    scales: list[Scale] = []
    for spec in sorted(desired.values(), key=lambda s: s.deployment_id):
        current = dgd_of(spec, live)
        if spec.authority != "managed":
            if current is not None and ours(current):
                applies.append(Apply(spec.deployment_id, spec.generation, released_dgd(current)))
            continue
        if not spec.should_run:
            if spec.adopted and current is not None and ours(current):
                # Not deleted: the adopted DGD could never be made again (docs/adoption.md).
                idle = _idle_adopted(spec, current)
                if idle is not None:
                    scales.extend(_through_adapters(spec, current, idle, adapters))
                    applies.append(
                        Apply(
                            spec.deployment_id,
                            spec.generation,
                            idle,
                            take_over=current.resource_version,
                        )
                    )
            continue
        try:
            manifest = _manifest(spec, current, live, target)
        except Refused as e:
            failures.append(Failure(spec.deployment_id, spec.generation, str(e)))
            continue
        if current is not None:
            scales.extend(_through_adapters(spec, current, manifest, adapters))
        if (
            current is not None
            and current.annotations.get(ANNOTATION_SPEC_HASH)
            == (manifest["metadata"]["annotations"][ANNOTATION_SPEC_HASH])
            and not _renamed(spec, current, manifest)
        ):
            continue
        if dgd_version == port.DGD_VERSION_NONE:
            failures.append(
                Failure(spec.deployment_id, spec.generation, dgd_versions.no_version_message([]))
            )
            continue
        reason = _renamed(spec, current, manifest) or _recreate_reason(
            spec, current, manifest, dgd_version=dgd_version
        )
        if reason and current is not None:
            recreates.append(
                Delete(current.namespace, current.name, spec.deployment_id, recreate=reason)
            )
            continue
        take_over = current.resource_version if spec.adopted and current is not None else ""
        applies.append(Apply(spec.deployment_id, spec.generation, manifest, take_over=take_over))
    deletes = list(recreates)
    for dgd in sorted(live, key=lambda d: (d.namespace, d.name)):
        deployment_id = dgd.labels.get(port.LABEL_DEPLOYMENT_ID, "")
        if not deployment_id:
            continue
        held = desired.get(deployment_id)
        if held is not None:
            stopped = held.authority == "managed" and not held.should_run
            if ours(dgd) and stopped and not held.adopted:
                deletes.append(Delete(dgd.namespace, dgd.name, deployment_id))
            continue
        if _forget(dgd, deployment_id, released=released, removed=removed):
            applies.append(Apply(deployment_id, 0, forgotten(dgd), letting_go=True))
        elif ours(dgd):
            deletes.append(Delete(dgd.namespace, dgd.name, deployment_id))
    return Plan(tuple(applies), tuple(deletes), tuple(failures), tuple(scales))


def _idle_adopted(spec: DeploymentSpec, current: port.Dgd) -> dict[str, Any] | None:
    """The adopted DGD with no worker, when it still has some (None: nothing to write)."""
    try:
        manifest = adopted(replace(spec, replicas=0, surge_replicas=0), current)
    except Refused:
        # Its flags cannot be written: scale it to zero as it is.
        manifest = adopted(
            replace(
                spec, replicas=0, surge_replicas=0, serving=replace(spec.serving, engine_args=())
            ),
            current,
        )
    if (
        current.annotations.get(ANNOTATION_SPEC_HASH)
        == manifest["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
    ):
        return None
    return manifest


def _renamed(spec: DeploymentSpec, current: port.Dgd | None, manifest: Mapping[str, Any]) -> str:
    """Why our own DGD must be made again under another name ("" if it keeps its name): one
    made before names were fitted to Dynamo's label limits (agent/render/names.py) has pods
    the operator cannot label. Adopted DGDs are never renamed (they render `adopted`)."""
    if current is None or spec.adopted:
        return ""
    name = manifest["metadata"]["name"]
    if current.name == name:
        return ""
    return (
        f"its name {current.name} is too long for the labels Dynamo's operator derives from it"
        f" (at most 63 characters); it is made again as {name}"
    )


def _recreate_reason(
    spec: DeploymentSpec,
    current: port.Dgd | None,
    manifest: Mapping[str, Any],
    *,
    dgd_version: str,
) -> str:
    """Why our DGD must be deleted and created again rather than changed ("" if it need not):
    v1beta1's webhook refuses a new component set, a type or backendFramework change."""
    if current is None or spec.adopted or dgd_version != dgd_versions.V1BETA1:
        return ""
    if ours(current) != spec.deployment_id:
        return ""
    reason = dgd_versions.recreate_reason(current.spec, manifest.get("spec", {}))
    return f"recreating the DynamoGraphDeployment: {reason}" if reason else ""


def adapter_of(
    dgd: port.Dgd, component: str, adapters: Sequence[port.ScalingAdapter]
) -> port.ScalingAdapter | None:
    return next(
        (
            a
            for a in adapters
            if (a.namespace, a.dgd_name, a.component) == (dgd.namespace, dgd.name, component)
        ),
        None,
    )


def scaled_by_adapter(service: Mapping[str, Any]) -> bool:
    """The service opted into the scaling adapter (internal form: `scalingAdapter.enabled`)."""
    adapter = service.get("scalingAdapter")
    return isinstance(adapter, Mapping) and adapter.get("enabled", True) is not False


def _through_adapters(
    spec: DeploymentSpec,
    current: port.Dgd,
    manifest: dict[str, Any],
    adapters: Sequence[port.ScalingAdapter],
) -> list[Scale]:
    """Keep the live replicas in `manifest` for every component scaled by an adapter (so the
    webhook accepts the write), and the Scale actions that set what `manifest` wanted there.
    The spec hash was taken before: a change of the declared replicas still changes it."""
    live_services = current.spec.get("services", {})
    services = manifest.get("spec", {}).get("services", {})
    scales = []
    for name, service in services.items():
        live = live_services.get(name)
        if not isinstance(live, Mapping) or not scaled_by_adapter(live):
            continue
        wanted = service.get("replicas", 1)
        if "replicas" in live:
            service["replicas"] = live["replicas"]
        else:
            service.pop("replicas", None)
        adapter = adapter_of(current, name, adapters)
        if adapter is not None and not adapter.autoscaler and adapter.replicas != wanted:
            scales.append(
                Scale(
                    adapter.namespace,
                    adapter.name,
                    int(wanted),
                    spec.deployment_id,
                    spec.generation,
                )
            )
    return scales


def _forget(dgd: port.Dgd, deployment_id: str, *, released: Set[str], removed: Set[str]) -> bool:
    """Should a DGD whose deployment the hub no longer declares be let go (not deleted)?"""
    if deployment_id in released:
        return True
    if not ours(dgd):
        # Demoted already (our managed-by label is off): never ours to delete again.
        return True
    if deployment_id in removed:
        return False
    # The hub said nothing of it (a snapshot): delete only what we made ourselves.
    return ANNOTATION_ADOPTED in dgd.annotations


@dataclass(frozen=True)
class _Target:
    """What rendering needs of the cluster and the agent's configuration."""

    namespace: str
    images: Mapping[str, str] | None
    nodes: Sequence[port.Node]
    overrides: Mapping[str, str]
    # Dynamo's operator version as its webhook stamped it on the live DGDs ("" none seen).
    operator_version: str = ""


def _manifest(
    spec: DeploymentSpec, current: port.Dgd | None, live: Sequence[port.Dgd], target: _Target
) -> dict[str, Any]:
    namespace = target.namespace
    if spec.adopted:
        if current is None:
            raise Refused(
                f"the adopted DynamoGraphDeployment {spec.dgd_namespace}/{spec.dgd_name} is"
                " gone from the cluster"
            )
        return adopted(spec, current)
    try:
        manifest = rendered(
            spec,
            namespace=namespace,
            images=target.images,
            nodes=target.nodes,
            class_overrides=target.overrides,
            operator_version=target.operator_version,
        )
    except RenderError as e:
        raise Refused(str(e)) from e
    name = manifest["metadata"]["name"]
    squatter = next((d for d in live if (d.namespace, d.name) == (namespace, name)), None)
    if squatter is not None and squatter.labels.get(port.LABEL_DEPLOYMENT_ID) != (
        spec.deployment_id
    ):
        raise Refused(
            f"DynamoGraphDeployment {namespace}/{name} exists and is not this"
            " deployment's: adopt it (discovered) or rename the workload"
        )
    return manifest
