"""Discovery: describing a DynamoGraphDeployment the agent did not create. Pure.

Called by the observer for every DGD without our deployment-id label; the hub records the
description under /v1/discovered (docs/adoption.md). It reads:
- services, roles, replicas and GPUs per pod from the DGD's spec;
- imported_args: the main worker's engine flags (the decode worker, or the only worker) as its
  oldest running pod runs them (the pod's argv), else as the DGD declares them; a `sh -c`
  script is taken apart and the launcher dropped (agent/cluster/shape.py);
- engine version: our engine-version label when its pods have one, else the image tag;
- device class: the class of the GPUs on the nodes its worker pods run on;
- replicas: worker replicas; for disaggregated serving, counted the way the renderer lays a
  replica out (agent/render/dgd.py: replicas x prefill_workers prefill pods, replicas x
  decode_workers decode pods): the number of sets is the greatest common divisor of the two
  pod counts, a set holds prefill/sets prefill and decode/sets decode workers, and its devices
  are theirs together, so replicas x devices per replica is every worker device that runs
  (the hub reads the same shape off the report: hub/adoption.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from agent.cluster import port
from agent.cluster.shape import (
    WORKER_TYPES,
    gpus_of,
    live_flags,
    main_container,
    main_worker,
    role_of,
)
from common.discovered import DiscoveredObservation, DiscoveredService, ReplicaObservation


def pod_report(pod: port.Pod) -> ReplicaObservation:
    labels = (
        pod.labels.get(port.DYNAMO_SUB_COMPONENT_TYPE),
        pod.labels.get(port.DYNAMO_COMPONENT_TYPE),
    )
    return ReplicaObservation(
        name=pod.name,
        namespace=pod.namespace,
        node_id=pod.node_name,
        ready=pod.ready and bool(pod.node_name),
        serving_digest=pod.labels.get(port.LABEL_SERVING_DIGEST, ""),
        engine_version=pod.labels.get(port.LABEL_ENGINE_VERSION) or image_tag(pod.image),
        role=next((r for r in labels if r in ("prefill", "decode")), "worker"),
    )


def image_tag(image: str) -> str:
    """ "vllm-runtime:0.10.1" -> "0.10.1"; "" without a tag (or for a digest reference)."""
    _, sep, tag = image.rpartition(":")
    return tag.removeprefix("v") if sep and "/" not in tag and "@" not in image else ""


def describe(
    dgd: port.Dgd, pods: Sequence[port.Pod], node_classes: Mapping[str, str]
) -> DiscoveredObservation:
    specs: Mapping[str, Any] = dgd.spec.get("services", {})
    services = tuple(_service(name, service, pods) for name, service in specs.items())
    main = main_worker(specs)
    main_service = next((s for s in services if s.name == main), None)
    classes = [node_classes[p.node_name] for p in pods if p.node_name in node_classes]
    replicas, ready, per_replica = _shape(services)
    return DiscoveredObservation(
        namespace=dgd.namespace,
        name=dgd.name,
        backend_framework=str(dgd.spec.get("backendFramework", "")),
        services=services,
        replicas=replicas,
        ready_replicas=ready,
        imported_args=main_service.args if main_service else (),
        engine_version=_engine_version(main_service, pods),
        device_class=max(sorted(set(classes)), key=classes.count) if classes else "",
        devices_per_replica=per_replica,
        pods=tuple(pod_report(p) for p in pods),
    )


def absent(namespace: str, name: str) -> DiscoveredObservation:
    return DiscoveredObservation(namespace=namespace, name=name, absent=True)


def _service(name: str, service: Mapping[str, Any], pods: Sequence[port.Pod]) -> DiscoveredService:
    mine = [p for p in pods if p.labels.get(port.DYNAMO_COMPONENT, name) == name]
    return DiscoveredService(
        name=name,
        component_type=str(service.get("componentType", "")),
        sub_component_type=str(service.get("subComponentType", "")),
        replicas=int(service.get("replicas", 0) or 0),
        ready_replicas=sum(1 for p in mine if p.ready),
        gpus_per_pod=gpus_of(service),
        image=str(main_container(service).get("image", "")),
        args=tuple(live_flags(name, service, pods)),
    )


def _shape(services: Sequence[DiscoveredService]) -> tuple[int, int, int]:
    """(replicas, ready replicas, devices per replica)."""
    workers = [s for s in services if s.component_type in WORKER_TYPES]
    if not workers:
        return 0, 0, 0
    roles = {
        role_of(
            s.name, {"subComponentType": s.sub_component_type, "componentType": s.component_type}
        ): s
        for s in workers
    }
    decode, prefill = roles.get("decode"), roles.get("prefill")
    if decode is not None and prefill is not None:
        sets = math.gcd(prefill.replicas, decode.replicas)
        if not (prefill.replicas and decode.replicas):
            return 0, 0, 0
        per_prefill, per_decode = prefill.replicas // sets, decode.replicas // sets
        per_replica = per_prefill * prefill.gpus_per_pod + per_decode * decode.gpus_per_pod
        ready = min(prefill.ready_replicas // per_prefill, decode.ready_replicas // per_decode)
        return sets, ready, per_replica
    main = workers[0]
    return main.replicas, main.ready_replicas, main.gpus_per_pod


def _engine_version(service: DiscoveredService | None, pods: Sequence[port.Pod]) -> str:
    for pod in pods:
        if port.LABEL_ENGINE_VERSION in pod.labels:
            return pod.labels[port.LABEL_ENGINE_VERSION]
    return image_tag(service.image) if service is not None else ""
