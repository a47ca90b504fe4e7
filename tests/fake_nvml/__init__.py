"""The fake libnvidia-ml.so.1 (fake_nvml.c): build it, describe a node to it, check its sessions.

Tests run the real nvidia-ml-py bindings against this library, so what they check is what
agent/devices/nvml.py does over pynvml, not over a patched pynvml. The library reads the node
from the file named by $FAKE_NVML_CONFIG at the first init of a session; `node()` builds the
key=value lines that file holds (the keys are listed at the top of fake_nvml.c).

Used by tests/unit/devices/conftest.py.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

SOURCE = Path(__file__).with_name("fake_nvml.c")
CONFIG_ENV = "FAKE_NVML_CONFIG"
LIBRARY_NAME = "libnvidia-ml.so.1"


def build(directory: Path) -> Path:
    """Compile the library into `directory`; gcc is a test dependency."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("gcc is needed to build the fake NVML library (tests/fake_nvml)")
    library = directory / LIBRARY_NAME
    command = [gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(library), str(SOURCE)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"building {SOURCE.name} failed:\n{done.stderr}")
    return library


def node(*gpus: Mapping[str, object], **settings: object) -> dict[str, object]:
    """A node's configuration: one mapping of per-GPU keys for each GPU, in index order.

    node({"name": "NVIDIA L40S", "memory_mib": 46068}, driver_version="550.54.15")
    -> {"gpu_count": 1, "driver_version": "550.54.15", "gpu.0.name": ..., "gpu.0.memory_mib": ...}
    """
    lines: dict[str, object] = {"gpu_count": len(gpus), **settings}
    for index, fields in enumerate(gpus):
        lines.update({f"gpu.{index}.{key}": value for key, value in fields.items()})
    return lines


def write_config(path: Path, lines: Mapping[str, object]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
    return path


def open_sessions(library: Path) -> int:
    """Inits not yet shut down (the library stays loaded in the process between tests)."""
    count: int = ctypes.CDLL(str(library)).fakeNvmlOpenSessions()
    return count


def forget_sessions(library: Path) -> None:
    ctypes.CDLL(str(library)).fakeNvmlForget()
