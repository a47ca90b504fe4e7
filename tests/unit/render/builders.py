"""Builders for renderer test inputs (nomad's `mock.Node()` style) and the YAML dump.

Each builder returns a valid value with realistic defaults; keyword overrides change only
what a test is about, so a test shows its subject and nothing else.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import yaml

from agent.model import DeploymentSpec, KvCache, Serving


def make_kv_cache(**overrides: Any) -> KvCache:
    return dataclasses.replace(KvCache(), **overrides)


def make_serving(**overrides: Any) -> Serving:
    base = Serving(engine="vllm", engine_version="0.11.0", model="Qwen/Qwen3-0.6B")
    return dataclasses.replace(base, **overrides)


def make_deployment(*, serving: Serving | None = None, **overrides: Any) -> DeploymentSpec:
    serving = serving or make_serving()
    base = DeploymentSpec(
        deployment_id="dep_7f3a9c2e41d0",
        name="qwen-chat-us-east-1",
        workload_id="wl_5b1e0d4c9a77",
        workload_name="qwen-chat",
        project="research",
        replicas=2,
        admitted=True,
        enabled=True,
        authority="managed",
        serving=serving,
        generation=3,
        serving_digest="svg_0123456789abcdef",
        device_class="H100-80GB",
        devices_per_replica=serving.devices_per_worker * serving.workers_per_replica,
        revision=17,
    )
    return dataclasses.replace(base, **overrides)


def with_serving(spec: DeploymentSpec, **overrides: Any) -> DeploymentSpec:
    """`spec` with some serving fields changed."""
    return dataclasses.replace(spec, serving=dataclasses.replace(spec.serving, **overrides))


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings, so embedded YAML reads as YAML in golden files."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def to_yaml(manifest: dict[str, Any]) -> str:
    """The manifest as YAML in the renderer's key order (what a golden file holds)."""
    text: str = yaml.dump(manifest, Dumper=_Dumper, sort_keys=False, width=1000)
    return text
