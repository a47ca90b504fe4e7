"""Engine flags read off a DGD's containers and pods in every spelling manifests use, and
written back without touching the launcher or the shell wrapper (agent/cluster/shape.py)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.cluster import port
from agent.cluster.shape import (
    Unrewritable,
    engine_argv,
    live_flags,
    role_of,
    with_engine_flags,
    worker_args,
)
from agent.render.trtllm import WRAPPER

FLAGS = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096"]


def service(**container: Any) -> dict[str, Any]:
    return {"componentType": "worker", "extraPodSpec": {"mainContainer": container}}


def pod(name: str, argv: list[str], *, created: float, component: str = "Worker") -> port.Pod:
    return port.Pod(
        name=name,
        namespace="ml",
        labels={port.DYNAMO_COMPONENT: component},
        node_name="node-1",
        phase="Running",
        ready=True,
        gpu_request=1,
        argv=tuple(argv),
        created_unix=created,
    )


@pytest.mark.parametrize(
    ("container", "flags"),
    [
        ({"command": ["python3", "-m", "dynamo.vllm"], "args": FLAGS}, FLAGS),
        ({"command": ["python3", "-m", "dynamo.vllm", *FLAGS[:2]], "args": FLAGS[2:]}, FLAGS),
        ({"command": ["python3", "-m", "dynamo.vllm", *FLAGS]}, FLAGS),
        ({"args": FLAGS}, FLAGS),
        (
            {"command": ["/bin/sh", "-c"], "args": ["python3 -m dynamo.vllm " + " ".join(FLAGS)]},
            FLAGS,
        ),
        ({"command": ["bash", "-lc", "exec python3 -u -m dynamo.vllm " + " ".join(FLAGS)]}, FLAGS),
        (
            {"command": ["sh", "-c", "cd /w && python3 -m dynamo.vllm --model 'a b' 2>&1 | tee x"]},
            ["--model", "a b"],
        ),
        (
            {
                "command": ["sh", "-c", WRAPPER, "sh"],
                "args": ["python3", "-m", "dynamo.trtllm", *FLAGS],
            },
            FLAGS,
        ),
        ({"command": ["env", "A=1", "dynamo-run", *FLAGS]}, FLAGS),
    ],
    ids=[
        "exec form",
        "flags split across command and args",
        "all in command",
        "image entrypoint",
        "shell form, one string",
        "bash -lc with exec and python options",
        "script with setup and a pipe",
        "wrapper passing the engine as $@",
        "env prefix and an executable",
    ],
)
def test_the_engine_flags_are_read_in_every_spelling(
    container: dict[str, Any], flags: list[str]
) -> None:
    assert worker_args(service(**container)) == flags


def test_an_unreadable_script_is_kept_whole() -> None:
    assert engine_argv(["sh", "-c", "python3 -m dynamo.vllm --model 'unbalanced"]) == [
        "sh",
        "-c",
        "python3 -m dynamo.vllm --model 'unbalanced",
    ]


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        (
            {"image": "img", "command": ["python3", "-m", "dynamo.vllm"], "args": FLAGS},
            {"image": "img", "command": ["python3", "-m", "dynamo.vllm"], "args": ["--x", "1"]},
        ),
        (
            {"command": ["/bin/sh", "-c"], "args": ["python3 -m dynamo.vllm --model m"]},
            {"command": ["/bin/sh", "-c"], "args": ["python3 -m dynamo.vllm --x 1"]},
        ),
        (
            {"command": ["sh", "-c", WRAPPER, "sh"], "args": ["python3", "-m", "dynamo.trtllm"]},
            {
                "command": ["sh", "-c", WRAPPER, "sh"],
                "args": ["python3", "-m", "dynamo.trtllm", "--x", "1"],
            },
        ),
        (
            {"command": ["python3", "-m", "dynamo.vllm", "--model", "m"]},
            {"command": ["python3", "-m", "dynamo.vllm", "--x", "1"]},
        ),
    ],
    ids=["exec form: only args change", "shell form", "wrapper", "all in command"],
)
def test_new_flags_keep_the_launcher_and_the_wrapper(
    container: dict[str, Any], expected: dict[str, Any]
) -> None:
    rewritten = with_engine_flags(container, ["--x", "1"])
    assert rewritten == expected
    assert worker_args(service(**rewritten)) == ["--x", "1"]


def test_a_script_that_does_more_than_run_the_engine_is_not_rewritten() -> None:
    with pytest.raises(Unrewritable):
        with_engine_flags(
            {"command": ["sh", "-c", "cd /w && python3 -m dynamo.vllm --m x"]}, ["--x"]
        )


def test_live_flags_come_from_the_oldest_running_pod_of_the_service_else_the_spec() -> None:
    spec = service(command=["python3", "-m", "dynamo.vllm"], args=["--from", "spec"])
    pods = [
        pod("new", ["python3", "-m", "dynamo.vllm", "--from", "new"], created=2),
        pod("old", ["python3", "-m", "dynamo.vllm", "--from", "old"], created=1),
        pod("other", ["python3", "-m", "dynamo.vllm", "--from", "x"], created=0, component="P"),
    ]
    assert live_flags("Worker", spec, pods) == ["--from", "old"]
    assert live_flags("Worker", spec, []) == ["--from", "spec"]


@pytest.mark.parametrize(
    ("name", "fields", "role"),
    [
        ("VllmDecodeWorker", {"componentType": "worker"}, "decode"),
        ("W", {"componentType": "worker", "subComponentType": "prefill"}, "prefill"),
        ("W", {"componentType": "decode"}, "decode"),
        ("VllmWorker", {"componentType": "worker"}, "worker"),
    ],
)
def test_roles_come_from_the_sub_component_type_the_component_type_or_the_name(
    name: str, fields: dict[str, str], role: str
) -> None:
    assert role_of(name, fields) == role
