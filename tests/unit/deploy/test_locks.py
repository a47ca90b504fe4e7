"""requirements/hub.lock and requirements/agent.lock, which the images install with --no-deps
and --require-hashes (`make locks` writes them with uv): every dependency of the image's
program pinned exactly, inside its declared range, with its hashes; the hub's without the
Kubernetes client and NVML, the agent's without the PostgreSQL driver; and (where this
environment can tell) nothing that a locked package needs left out."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from dataclasses import dataclass

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.unit.deploy.manifests import ROOT

LOCKS = {image: ROOT / "requirements" / f"{image}.lock" for image in ("hub", "agent")}
PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!_-]+)")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")
# What each image must not carry: the other program's own dependencies.
NOT_IN = {
    "hub": {"kubernetes", "nvidia-ml-py"},
    "agent": {"psycopg", "psycopg-binary", "psycopg-pool", "aiohttp-jinja2", "jinja2"},
}


@dataclass(frozen=True)
class Pin:
    version: str
    hashes: tuple[str, ...]


def entries(image: str) -> dict[str, Pin]:
    """name -> its pin, from the lock's requirement lines (a line, its `\\` continuations)."""
    text = re.sub(r"#[^\n]*", "", LOCKS[image].read_text())
    out: dict[str, Pin] = {}
    for block in re.split(r"(?<!\\)\n", text):
        words = block.replace("\\\n", " ").split()
        if not words:
            continue
        match = PIN.fullmatch(words[0])
        assert match, f"{image}.lock: not an exact pin: {words[0]!r}"
        name = canonicalize_name(match["name"])
        assert name not in out, f"{image}.lock: {name} pinned twice"
        assert all(HASH.fullmatch(w) for w in words[1:]), f"{image}.lock: {words[1:]}"
        out[name] = Pin(match["version"], tuple(words[1:]))
    return out


def requirements(image: str) -> list[Requirement]:
    """The base dependencies and the image's extra, from pyproject.toml."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    return [Requirement(t) for t in project["dependencies"]] + [
        Requirement(t) for t in project["optional-dependencies"][image]
    ]


CASES = [(image, r) for image in LOCKS for r in requirements(image)]


@pytest.mark.parametrize("image", LOCKS)
def test_every_pin_is_exact_and_carries_its_hashes(image: str) -> None:
    pins = entries(image)
    assert len(pins) >= 15
    for name, pin in pins.items():
        assert pin.hashes, f"{image}.lock: {name} has no hash"


@pytest.mark.parametrize(("image", "requirement"), CASES, ids=lambda c: str(c))
def test_every_dependency_of_the_image_is_pinned_within_its_range(
    image: str, requirement: Requirement
) -> None:
    pins = entries(image)
    name = canonicalize_name(requirement.name)
    assert name in pins, f"{requirement} is not in {image}.lock"
    assert requirement.specifier.contains(pins[name].version, prereleases=True), (
        f"{name}=={pins[name].version} is outside {requirement.specifier}"
    )


@pytest.mark.parametrize("image", LOCKS)
def test_an_image_carries_nothing_only_the_other_program_needs(image: str) -> None:
    assert NOT_IN[image] & set(entries(image)) == set()


def test_both_images_pin_what_they_share_alike() -> None:
    hub, agent = entries("hub"), entries("agent")
    assert {n: hub[n].version for n in hub.keys() & agent.keys()} == {
        n: agent[n].version for n in hub.keys() & agent.keys()
    }


@pytest.mark.parametrize("image", LOCKS)
def test_the_project_itself_is_not_in_the_lock(image: str) -> None:
    assert "wingsmith" not in entries(image)


@pytest.mark.parametrize("image", LOCKS)
def test_what_locked_packages_need_is_locked_too(image: str) -> None:
    """--no-deps installs nothing the lock leaves out. Checked through the metadata of the
    packages installed here at the locked version (markers for this interpreter)."""
    pins = {name: pin.version for name, pin in entries(image).items()}
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
