"""A discovered disaggregated DGD is counted the way a rendered one is (issue 9, item 5):
the agent describes the DGD our renderer makes, with our labels taken off, and must find the
deployment's replicas and devices per replica, and its engine arguments. The same holds for
the DGD as a v1beta1-serving API server returns it (components, read through
`dgd_versions.to_internal` as the Kubernetes adapter reads it; issue 10, item 3)."""

from __future__ import annotations

import math

import pytest

from agent import discover
from agent.cluster import dgd_versions, port
from agent.render.dgd import render_dgd, render_dgd_as
from tests.unit.render.builders import make_deployment, make_serving


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
@pytest.mark.parametrize(
    ("replicas", "prefill", "decode", "tp"),
    [(2, 1, 2, 4), (1, 2, 1, 2), (3, 1, 1, 8), (2, 2, 3, 1), (1, 1, 1, 4), (1, 2, 2, 1)],
)
def test_a_rendered_disaggregated_dgd_found_running_counts_as_it_was_rendered(
    replicas: int, prefill: int, decode: int, tp: int, version: str
) -> None:
    spec = make_deployment(
        replicas=replicas,
        serving=make_serving(
            mode="disaggregated",
            prefill_workers=prefill,
            decode_workers=decode,
            tensor_parallel=tp,
        ),
    )
    rendered = render_dgd(spec, namespace="wingsmith")
    manifest = dgd_versions.to_internal(render_dgd_as(version, spec, namespace="wingsmith"))
    dgd = port.Dgd(
        namespace=manifest["metadata"]["namespace"],
        name=manifest["metadata"]["name"],
        labels={},
        spec=manifest["spec"],
        status={},
    )
    found = discover.describe(dgd, pods=[], node_classes={})
    roles = {s.name: s.component_type for s in found.services}
    assert roles == {
        name: service["componentType"] for name, service in rendered["spec"]["services"].items()
    }
    # The engine's arguments, read off the decode worker's `main` container in v1beta1.
    as_rendered = discover.describe(
        port.Dgd("wingsmith", "as-rendered", {}, rendered["spec"], {}), pods=[], node_classes={}
    )
    assert found.imported_args and found.imported_args == as_rendered.imported_args
    assert found.devices_per_replica * found.replicas == spec.devices_per_replica * replicas, (
        "every worker device that runs, no more, no less"
    )
    if math.gcd(prefill, decode) == 1:
        # One set per replica whenever the workers of one share no common factor (2 prefill
        # + 2 decode reads as two sets of 1 + 1: the same devices, counted finer).
        assert (found.replicas, found.devices_per_replica) == (
            replicas,
            spec.devices_per_replica,
        )
