"""The socket and the channel: kubelet restarts, a kubelet that is gone, a missing mount."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import grpc
import pytest

from agent.kubelet.client import PodResourcesClient, socket_identity
from agent.kubelet.errors import KubeletError, KubeletTimeout, KubeletUnavailable
from tests.unit.kubelet.builders import GPU, container, devices, pod
from tests.unit.kubelet.conftest import MakeClient, MakeKubelet
from tests.unit.kubelet.fake_kubelet import FakeKubelet

G0 = "GPU-0b8e5a52-1c7e-4f55-9c3d-6a0d2c1f0000"


def test_a_restarted_kubelet_is_reached_on_its_new_socket(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    client = make_client()
    assert client.list() == []
    before = socket_identity(kubelet.socket_path)

    kubelet.restart()
    kubelet.pods = [pod("p", container("c", devices(GPU, G0)))]

    assert socket_identity(kubelet.socket_path) != before
    assert [e.device_ids for e in client.list()] == [(G0,)]


def test_a_stopped_kubelet_is_unavailable_and_found_again_when_it_is_back(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    client = make_client()
    client.list()

    kubelet.stop()
    with pytest.raises(KubeletUnavailable):
        client.list()

    kubelet.start()
    assert client.list() == []


def test_unavailable_is_retried_once_on_a_fresh_channel(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    client = make_client()
    kubelet.fail_next(1, grpc.StatusCode.UNAVAILABLE)

    assert client.allocatable() == []
    assert len(kubelet.calls) == 2

    kubelet.fail_next(2, grpc.StatusCode.UNAVAILABLE)
    with pytest.raises(KubeletUnavailable) as raised:
        client.allocatable()
    assert raised.value.socket_path == kubelet.socket_path


def test_a_kubelet_that_died_uncleanly_is_unavailable_until_it_is_back(
    socket_path: str, make_kubelet: MakeKubelet, make_client: MakeClient
) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(socket_path)
    stale.close()  # the socket file stays, nobody listens on it
    client = make_client()

    with pytest.raises(KubeletUnavailable):
        client.list()

    os.unlink(socket_path)  # what the kubelet does before it binds again
    make_kubelet().start()
    assert client.list() == []


def test_a_missing_socket_says_to_mount_the_pod_resources_directory(
    socket_dir: Path, make_client: MakeClient
) -> None:
    with pytest.raises(KubeletUnavailable) as raised:
        make_client(str(socket_dir / "absent" / "kubelet.sock")).list()

    assert raised.value.socket_path == str(socket_dir / "absent" / "kubelet.sock")
    assert "is the pod-resources directory mounted?" in raised.value.reason
    assert isinstance(raised.value.__cause__, FileNotFoundError)


def test_a_directory_where_the_socket_should_be_is_unavailable(
    socket_path: str, make_client: MakeClient
) -> None:
    # What a hostPath mount of the socket file leaves behind when the kubelet had not made it.
    os.mkdir(socket_path)

    with pytest.raises(KubeletUnavailable) as raised:
        make_client().list()

    assert "is the pod-resources directory mounted?" in raised.value.reason


def test_a_kubelet_that_does_not_answer_times_out(
    kubelet: FakeKubelet, make_client: MakeClient
) -> None:
    kubelet.hang_next(1)

    with pytest.raises(KubeletTimeout) as raised:
        make_client(timeout_s=0.05).list()

    assert raised.value.method == "List"


def test_the_client_is_a_context_manager_and_refuses_calls_once_closed(
    kubelet: FakeKubelet, socket_path: str
) -> None:
    with PodResourcesClient(socket_path) as client:
        assert client.list() == []

    with pytest.raises(KubeletError):
        client.list()
