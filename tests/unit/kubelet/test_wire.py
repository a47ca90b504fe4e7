"""The wire: our proto serves the kubelet's method paths, and the fake kubelet is complete."""

from __future__ import annotations

import pytest

from agent.kubelet.client import METHODS, SERVICE_NAME
from agent.kubelet.errors import KubeletCallFailed
from k8s.podresources.v1 import api_pb2
from tests.unit.kubelet.conftest import MakeClient, MakeKubelet
from tests.unit.kubelet.fake_kubelet import KUBELET_SERVICE, FakeKubelet


def test_the_client_calls_the_service_name_the_kubelet_registers(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    client = make_client()

    client.list()
    client.allocatable()
    with pytest.raises(KubeletCallFailed):
        client.get(namespace="serving", pod_name="absent")

    assert kubelet.calls == [
        "/v1.PodResourcesLister/List",
        "/v1.PodResourcesLister/GetAllocatableResources",
        "/v1.PodResourcesLister/Get",
    ]


def test_our_proto_names_the_service_as_the_kubelet_does() -> None:
    service = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]

    assert service.full_name == SERVICE_NAME == KUBELET_SERVICE
    assert [m.name for m in service.methods] == ["List", "GetAllocatableResources", "Get"]


def test_the_clients_method_table_is_the_descriptors() -> None:
    service = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]

    assert {
        name: (request.DESCRIPTOR.full_name, response.DESCRIPTOR.full_name)
        for name, (request, response) in METHODS.items()
    } == {m.name: (m.input_type.full_name, m.output_type.full_name) for m in service.methods}


def test_the_fake_kubelet_serves_every_rpc_of_the_descriptor() -> None:
    service = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
    handler = FakeKubelet("/unused")._handlers()

    class _Details:
        def __init__(self, method: str) -> None:
            self.method = method

    missing = [
        m.name
        for m in service.methods
        if handler.service(_Details(f"/{KUBELET_SERVICE}/{m.name}")) is None
    ]
    assert missing == []


def test_a_server_under_any_other_service_name_is_not_answering_the_client(
    make_kubelet: MakeKubelet, make_client: MakeClient
) -> None:
    impostor = make_kubelet(service_name="k8s.podresources.v1.PodResourcesLister")
    impostor.start()

    with pytest.raises(KubeletCallFailed) as raised:
        make_client().list()

    assert raised.value.code == "UNIMPLEMENTED"
    assert impostor.calls == ["/v1.PodResourcesLister/List"]
