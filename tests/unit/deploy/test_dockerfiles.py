"""Dockerfile.hub and Dockerfile.agent, read as text (no Docker engine here): installs only
from the lock file, without resolving or caching; a slim, pinned base; who the process runs
as; health checks; OCI labels; and agreement with the manifests that run the images."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.unit.deploy import manifests
from tests.unit.deploy.manifests import ROOT, Instruction, one

IMAGES = {"hub": ROOT / "Dockerfile.hub", "agent": ROOT / "Dockerfile.agent"}
LOCKS = {"hub": "requirements/hub.lock", "agent": "requirements/agent.lock"}
OCI_LABELS = {
    "org.opencontainers.image.title",
    "org.opencontainers.image.description",
    "org.opencontainers.image.version",
    "org.opencontainers.image.revision",
    "org.opencontainers.image.created",
    "org.opencontainers.image.source",
}


def stages(image: str) -> list[list[Instruction]]:
    return manifests.dockerfile(IMAGES[image])


def final(image: str) -> list[Instruction]:
    return stages(image)[-1]


def only(stage: list[Instruction], keyword: str) -> Instruction:
    (found,) = [i for i in stage if i.keyword == keyword]
    return found


def pip_installs(image: str) -> list[list[str]]:
    """Each `pip install` / `pip wheel` of any RUN, as its words."""
    out = []
    for stage in stages(image):
        for run in (i for i in stage if i.keyword == "RUN"):
            for command in re.split(r"&&|;", run.text):
                words = command.split()
                pip = [n for n, w in enumerate(words) if w.endswith("pip")]
                if pip and words[pip[0] + 1 : pip[0] + 2] in (["install"], ["wheel"]):
                    out.append(words[pip[0] :])
    return out


@pytest.mark.parametrize("image", IMAGES)
def test_the_base_is_slim_python_and_pinned(image: str) -> None:
    (arg,) = [i for i in stages(image)[0] if i.keyword == "ARG"]
    name, _, base = arg.text.partition("=")
    assert name == "PYTHON_IMAGE"
    assert re.fullmatch(r"python:3\.1[1-9][.\d]*-slim(-\w+)?(@sha256:[0-9a-f]{64})?", base), base
    froms = [s[0].text for s in stages(image)[1:]]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]


@pytest.mark.parametrize("image", IMAGES)
def test_every_pip_install_is_no_deps_and_no_cache(image: str) -> None:
    installs = pip_installs(image)
    assert len(installs) >= 3
    for words in installs:
        assert "--no-deps" in words and "--no-cache-dir" in words, words


@pytest.mark.parametrize("image", IMAGES)
def test_third_party_packages_come_from_the_lock_file_as_wheels(image: str) -> None:
    (locked,) = [w for w in pip_installs(image) if "-r" in w]
    assert locked[locked.index("-r") + 1] == LOCKS[image]
    assert "--only-binary=:all:" in locked and "--require-hashes" in locked
    copies = [i.words() for i in stages(image)[1] if i.keyword == "COPY"]
    assert [LOCKS[image], LOCKS[image]] in copies


@pytest.mark.parametrize("image", IMAGES)
def test_the_project_is_built_with_a_pinned_setuptools_and_no_isolation(image: str) -> None:
    wheel = [w for w in pip_installs(image) if w[1] == "wheel"]
    assert wheel and "--no-build-isolation" in wheel[0]
    setuptools = [w for w in pip_installs(image) if any("setuptools==" in x for x in w)]
    assert setuptools
    (pin,) = [i for i in stages(image)[1] if i.text.startswith("SETUPTOOLS_VERSION=")]
    assert re.fullmatch(r"SETUPTOOLS_VERSION=\d+(\.\d+)*", pin.text)


@pytest.mark.parametrize("image", IMAGES)
def test_what_the_build_copies_exists(image: str) -> None:
    for copy in (i for i in stages(image)[1] if i.keyword == "COPY"):
        *sources, _ = copy.words()
        for source in sources:
            assert (ROOT / source).exists(), source


@pytest.mark.parametrize("image", IMAGES)
def test_the_runtime_stage_copies_only_the_virtual_environment(image: str) -> None:
    copies = [i.words() for i in final(image) if i.keyword == "COPY"]
    assert copies == [["--from=build", "/opt/wingsmith", "/opt/wingsmith"]]
    assert not [i for i in final(image) if i.keyword == "ADD"]


@pytest.mark.parametrize("image", IMAGES)
def test_oci_labels(image: str) -> None:
    labels = {
        word.partition("=")[0] for i in final(image) if i.keyword == "LABEL" for word in i.words()
    }
    assert labels >= OCI_LABELS


@pytest.mark.parametrize("image", IMAGES)
def test_wingsmith_is_the_entry_point_and_the_command_picks_the_program(image: str) -> None:
    assert only(final(image), "ENTRYPOINT").exec_form() == ["wingsmith"]
    command = only(final(image), "CMD").exec_form()
    assert command is not None and command[0] == image


def test_the_hub_runs_as_its_own_non_root_user() -> None:
    user = only(final("hub"), "USER").text
    uid, _, gid = user.partition(":")
    assert uid == gid == "10001"


def test_the_agent_runs_as_root_and_says_so() -> None:
    # Root for the kubelet's socket; the DaemonSet drops every capability (test_agent_deploy).
    assert only(final("agent"), "USER").text in ("0", "0:0", "root")
    assert "PodResources socket" in IMAGES["agent"].read_text()


def test_the_hub_health_check_asks_healthz_on_the_http_port() -> None:
    check = only(final("hub"), "HEALTHCHECK")
    command = check.exec_form()
    assert command is not None and command[:2] == ["python", "-c"]
    compile(command[2], "HEALTHCHECK", "exec")
    assert "127.0.0.1:8080/healthz" in command[2]
    assert "8080" in only(final("hub"), "EXPOSE").words()


def test_the_agent_has_no_health_check_to_run() -> None:
    assert only(final("agent"), "HEALTHCHECK").text == "NONE"


def test_the_hub_default_command_serves_tls_from_where_the_deployment_mounts_it() -> None:
    command = only(final("hub"), "CMD").exec_form()
    assert command is not None
    assert command[command.index("--tls-cert") + 1] == "/etc/wingsmith/tls/tls.crt"
    assert command[command.index("--tls-key") + 1] == "/etc/wingsmith/tls/tls.key"


def test_the_hub_image_user_is_the_deployment_user(hub_build: Any) -> None:
    pod = manifests.pod_spec(one(hub_build, "Deployment"))
    uid = int(only(final("hub"), "USER").text.partition(":")[0])
    context = pod["securityContext"]
    assert context["runAsUser"] == context["fsGroup"] == uid
