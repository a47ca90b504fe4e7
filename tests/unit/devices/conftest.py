"""Fixtures for the NVML adapter's tests: the fake library, a fresh pynvml, a configured node."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pynvml
import pytest

from agent.devices.nvml import NvmlInventory
from tests import fake_nvml

MakeInventory = Callable[..., NvmlInventory]


@pytest.fixture(scope="session")
def fake_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_nvml.build(tmp_path_factory.mktemp("fake_nvml"))


@pytest.fixture(autouse=True)
def fresh_pynvml() -> Iterator[None]:
    """pynvml keeps the loaded library and its function pointers in module globals."""
    _forget_pynvml_library()
    yield
    _forget_pynvml_library()


@pytest.fixture
def config_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "fake-nvml.conf"
    monkeypatch.setenv(fake_nvml.CONFIG_ENV, str(path))
    return path


@pytest.fixture
def make_inventory(fake_library: Path, config_path: Path) -> Iterator[MakeInventory]:
    """make_inventory(node config, **NvmlInventory options): an inventory over the fake node."""

    def make(config: Mapping[str, object], **options: Any) -> NvmlInventory:
        fake_nvml.write_config(config_path, config)
        return NvmlInventory(library_path=str(fake_library), **options)

    yield make
    still_open = fake_nvml.open_sessions(fake_library)
    fake_nvml.forget_sessions(fake_library)
    assert still_open == 0, "an NVML session was left open (nvmlInit without nvmlShutdown)"


def _forget_pynvml_library() -> None:
    pynvml.nvmlLib = None
    pynvml._nvmlGetFunctionPointer_cache.clear()
