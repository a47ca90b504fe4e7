"""requirements/runtime.lock, which both images install with --no-deps: every runtime
dependency of pyproject.toml pinned exactly, inside its declared range, and (where this
environment can tell) nothing that a locked package needs left out."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.unit.deploy.manifests import ROOT

LOCK = ROOT / "requirements" / "runtime.lock"
PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!_-]+)")


def lock_lines() -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in LOCK.read_text().splitlines())
    return [line for line in lines if line]


def locked() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lock_lines():
        match = PIN.fullmatch(line)
        assert match, f"not an exact pin: {line!r}"
        name = canonicalize_name(match["name"])
        assert name not in out, f"{name} pinned twice"
        out[name] = match["version"]
    return out


def runtime_requirements() -> list[Requirement]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    return [Requirement(text) for text in project["dependencies"]]


def test_every_line_of_the_lock_is_an_exact_pin() -> None:
    assert len(locked()) == len(lock_lines())


@pytest.mark.parametrize("requirement", runtime_requirements(), ids=str)
def test_every_runtime_dependency_is_pinned_within_its_range(requirement: Requirement) -> None:
    pins = locked()
    name = canonicalize_name(requirement.name)
    assert name in pins, f"{requirement} is not in {LOCK.name}"
    assert requirement.specifier.contains(pins[name], prereleases=True), (
        f"{name}=={pins[name]} is outside {requirement.specifier}"
    )


def test_the_project_itself_is_not_in_the_lock() -> None:
    assert "wingsmith" not in locked()


def test_what_locked_packages_need_is_locked_too() -> None:
    """--no-deps installs nothing the lock leaves out. Checked through the metadata of the
    packages installed here at the locked version (markers for this interpreter)."""
    pins = locked()
    environment = {**default_environment(), "extra": ""}
    missing = set()
    checked = 0
    for name, version in pins.items():
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if dist.version != version:
            continue
        checked += 1
        for text in dist.requires or []:
            need = Requirement(text)
            applies = need.marker is None or need.marker.evaluate(environment)
            if applies and canonicalize_name(need.name) not in pins:
                missing.add(f"{need.name} (needed by {name})")
    if not checked:
        pytest.skip("no locked package is installed here at its locked version")
    assert missing == set()
