"""The adapter's watches: which list-then-watch loops `KubernetesCluster` runs and what each
lists. Pods Dynamo made and nodes always; DGDs and (where the version serves them) their
scaling adapters in the version being written, started and stopped with it. Each loop is a
`Reflector` (agent/cluster/kube/watch.py) filling one cache through `mapping`.
"""

from __future__ import annotations

import functools
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from kubernetes.client import CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from agent.cluster.kube import mapping
from agent.cluster.kube.cache import KindCache
from agent.cluster.kube.mapping import Key
from agent.cluster.kube.watch import Reflector, WatchTuning
from agent.cluster.port import (
    DGD_GROUP,
    DGD_PLURAL,
    DGDSA_PLURAL,
    DYNAMO_GRAPH,
    MANAGED_BY,
    Dgd,
    Node,
    Pod,
    ScalingAdapter,
)

T = TypeVar("T")


def reflector(
    kind: str,
    *,
    namespace: str | None,
    list_call: Callable[..., Any],
    mapper: Callable[[Mapping[str, Any]], T],
    cache: KindCache[T],
    tuning: WatchTuning,
    stopping: threading.Event,
    rng: random.Random,
) -> Reflector[T]:
    def map_item(obj: Mapping[str, Any]) -> tuple[Key, T]:
        return mapping.key(obj), mapper(obj)

    return Reflector(
        name=kind if namespace is None else f"{kind}/{namespace}",
        list_call=list_call,
        map_item=map_item,
        cache=cache,
        namespace=namespace,
        tuning=tuning,
        stopping=stopping,
        # One generator per watcher, seeded from the shared one: jitter differs per loop.
        rng=random.Random(rng.random()),
    )


def pods_and_nodes(
    core: CoreV1Api,
    namespaces: Sequence[str],
    *,
    pods: KindCache[Pod],
    nodes: KindCache[Node],
    tuning: WatchTuning,
    stopping: threading.Event,
    rng: random.Random,
) -> list[Reflector[Any]]:
    """The pods' watch per namespace (or one for all) and the nodes' watch."""
    reflectors: list[Reflector[Any]] = []
    for namespace in namespaces or (None,):
        reflectors.append(
            reflector(
                "pods",
                namespace=namespace,
                list_call=_pod_lister(core, namespace),
                mapper=mapping.pod,
                cache=pods,
                tuning=tuning,
                stopping=stopping,
                rng=rng,
            )
        )
    reflectors.append(
        reflector(
            "nodes",
            namespace=None,
            list_call=core.list_node,
            mapper=mapping.node,
            cache=nodes,
            tuning=tuning,
            stopping=stopping,
            rng=rng,
        )
    )
    return reflectors


def dgds_and_adapters(
    custom: CustomObjectsApi,
    namespaces: Sequence[str],
    version: str,
    *,
    with_adapters: bool,
    dgds: KindCache[Dgd],
    adapters: KindCache[ScalingAdapter],
    tuning: WatchTuning,
    stopping: threading.Event,
    rng: random.Random,
    rediscover: threading.Event,
) -> list[Reflector[Any]]:
    """The DGDs' watch per namespace in `version`, and their scaling adapters' where the
    version serves them; a 404 on either sets `rediscover` (the version stopped being
    served)."""
    reflectors: list[Reflector[Any]] = []
    for namespace in namespaces or (None,):
        reflectors.append(
            reflector(
                f"dgds.{version}",
                namespace=namespace,
                list_call=_dgd_lister(custom, namespace, version, DGD_PLURAL, rediscover),
                mapper=mapping.dgd,
                cache=dgds,
                tuning=tuning,
                stopping=stopping,
                rng=rng,
            )
        )
        if with_adapters:
            reflectors.append(
                reflector(
                    f"dgdsas.{version}",
                    namespace=namespace,
                    list_call=_dgd_lister(custom, namespace, version, DGDSA_PLURAL, rediscover),
                    mapper=functools.partial(mapping.scaling_adapter, own_manager=MANAGED_BY),
                    cache=adapters,
                    tuning=tuning,
                    stopping=stopping,
                    rng=rng,
                )
            )
    return reflectors


def _dgd_lister(
    custom: CustomObjectsApi,
    namespace: str | None,
    version: str,
    plural: str,
    rediscover: threading.Event,
) -> Callable[..., Any]:
    if namespace is None:
        call = functools.partial(custom.list_cluster_custom_object, DGD_GROUP, version, plural)
    else:
        call = functools.partial(
            custom.list_namespaced_custom_object,
            DGD_GROUP,
            version,
            namespace,
            plural,
        )

    def list_or_watch(**query: Any) -> Any:
        try:
            return call(**query)
        except ApiException as e:
            if e.status == 404:
                # The version stopped being served: find out which one is now.
                rediscover.set()
            raise

    return list_or_watch


def _pod_lister(core: CoreV1Api, namespace: str | None) -> Callable[..., Any]:
    # Only pods Dynamo made for a DGD: the selector "key exists" keeps the cache (and the
    # watch traffic) to the pods that matter, not every pod of the cluster.
    if namespace is None:
        return functools.partial(core.list_pod_for_all_namespaces, label_selector=DYNAMO_GRAPH)
    return functools.partial(core.list_namespaced_pod, namespace, label_selector=DYNAMO_GRAPH)
