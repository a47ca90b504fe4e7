"""`wingsmith agent devices` (agent/devices/diagnose.py): the JSON report, with the fake NVML."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from agent import main as agent_main
from agent.devices import diagnose
from agent.devices.model import Gpu, Inventory
from agent.devices.nvml import LIBRARY_NOT_FOUND
from agent.kubelet.model import Allocatable, PodDevices, PodResourcesSource
from tests import fake_nvml
from tests.fake_nvml import node

GPU_0 = "GPU-00000000-1111-2222-3333-444444444444"
GPU_1 = "GPU-00000001-1111-2222-3333-444444444444"
GPU_FIELDS = {f.name for f in dataclasses.fields(Gpu)}
L40S = {"name": "NVIDIA L40S", "memory_mib": 46068}


@pytest.fixture
def two_gpu_node(fake_library: Path, config_path: Path) -> list[str]:
    fake_nvml.write_config(
        config_path, node({**L40S, "uuid": GPU_0}, {**L40S, "uuid": GPU_1, "ecc_volatile": 4})
    )
    return ["--library-path", str(fake_library)]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = diagnose.main(argv)
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, report


def test_the_report_shows_the_driver_and_every_device_field(
    two_gpu_node: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*two_gpu_node, "--pod-resources-socket", str(tmp_path / "kubelet.sock")]

    code, report = run(argv, capsys)

    assert code == 0
    assert set(report) == {"driver_version", "nvml_error", "devices", "kubelet"}
    assert report["driver_version"] == "550.54.15 / CUDA 12.4"
    assert report["nvml_error"] is None
    assert [set(device) for device in report["devices"]] == [GPU_FIELDS, GPU_FIELDS]
    assert [(d["uuid"], d["device_class"], d["healthy"]) for d in report["devices"]] == [
        (GPU_0, "L40S-48GB", True),
        (GPU_1, "L40S-48GB", False),
    ]
    assert report["devices"][1]["health_reason"] == "uncorrectable ECC errors: 4"


def test_a_missing_kubelet_socket_is_reported_unavailable_with_the_path(
    two_gpu_node: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    socket = str(tmp_path / "kubelet.sock")

    code, report = run([*two_gpu_node, "--pod-resources-socket", socket], capsys)

    assert code == 0
    assert report["kubelet"]["socket"] == socket
    assert report["kubelet"]["status"].startswith("unavailable: no socket at ")


def test_a_build_without_the_kubelet_client_is_reported_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    socket = tmp_path / "kubelet.sock"
    socket.touch()
    monkeypatch.setattr(diagnose, "KUBELET_CLIENT_MODULE", "agent.kubelet.no_such_client")

    with pytest.raises(diagnose.NoKubelet, match="no kubelet client"):
        diagnose.connect_kubelet(str(socket))


def test_class_overrides_reach_the_inventory(
    two_gpu_node: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*two_gpu_node, "--class-override", "NVIDIA L40S=L40S-ECC-48GB"]
    argv += ["--pod-resources-socket", str(tmp_path / "none")]

    _, report = run(argv, capsys)

    assert {d["device_class"] for d in report["devices"]} == {"L40S-ECC-48GB"}


def test_without_nvml_the_report_says_why_and_the_exit_status_is_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--library-path", str(tmp_path / "libnvidia-ml.so.1")]
    argv += ["--pod-resources-socket", str(tmp_path / "none")]

    code, report = run(argv, capsys)

    assert code == 1
    assert report["devices"] == []
    assert report["nvml_error"].startswith(LIBRARY_NOT_FOUND)


def test_a_malformed_class_override_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        diagnose.main(["--class-override", "no-equals-sign"])

    assert exit_.value.code == 2
    assert "NAME=CLASS" in capsys.readouterr().err


def test_the_agent_command_line_hands_devices_to_the_diagnostic(
    two_gpu_node: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["devices", *two_gpu_node, "--pod-resources-socket", str(tmp_path / "none")]

    with pytest.raises(SystemExit) as exit_:
        agent_main.main(argv)

    assert exit_.value.code == 0
    assert len(json.loads(capsys.readouterr().out)["devices"]) == 2


# --- verification, with a kubelet of our own -------------------------------------------------


@dataclasses.dataclass
class FakeKubelet:
    allocatable_devices: list[Allocatable]
    pods: list[PodDevices]
    failure: Exception | None = None

    def list(self) -> list[PodDevices]:
        return self.pods

    def allocatable(self) -> list[Allocatable]:
        if self.failure:
            raise self.failure
        return self.allocatable_devices


def inventory() -> Inventory:
    healthy = Gpu(GPU_0, "NVIDIA L40S", 1, "00000000:17:00.0", "L40S-48GB")
    sick = dataclasses.replace(healthy, uuid=GPU_1, healthy=False, health_reason="ECC")
    return Inventory(devices=(healthy, sick), driver_version="550.54.15 / CUDA 12.4")


def report_with(kubelet: FakeKubelet) -> dict[str, Any]:
    def connect(socket_path: str) -> PodResourcesSource:
        return kubelet

    report = diagnose.build_report(inventory(), socket_path="/k.sock", connect=connect)
    decoded: dict[str, Any] = json.loads(json.dumps(report))  # as the command prints it
    return decoded


def test_with_the_kubelet_reachable_devices_are_verified_and_capacity_counted() -> None:
    kubelet = FakeKubelet(
        allocatable_devices=[
            Allocatable("nvidia.com/gpu", (GPU_0, GPU_1, "GPU-not-on-this-node")),
            Allocatable("example.com/nic", ("nic-0",)),
        ],
        pods=[PodDevices("serving", "llama-0", "main", "nvidia.com/gpu", (f"{GPU_0}::1",))],
    )

    status = report_with(kubelet)["kubelet"]

    assert status["status"] == "ok"
    assert [(v["uuid"], v["verified"], v["reason"]) for v in status["verification"]] == [
        (GPU_0, True, ""),
        (GPU_1, True, ""),
        ("GPU-not-on-this-node", False, "not found by NVML"),
    ]
    assert status["capacity"] == {"L40S-48GB": 1}
    assert status["allocations"] == [
        {
            "namespace": "serving",
            "pod_name": "llama-0",
            "resource_name": "nvidia.com/gpu",
            "device_ids": [GPU_0],
        }
    ]


def test_a_failing_kubelet_call_is_reported_not_raised() -> None:
    kubelet = FakeKubelet([], [], failure=RuntimeError("connection refused"))

    status = report_with(kubelet)["kubelet"]

    assert status == {
        "socket": "/k.sock",
        "status": "unavailable: RuntimeError: connection refused",
    }
