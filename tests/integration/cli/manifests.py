"""The `create -f` files the CLI integration tests apply."""

from __future__ import annotations

import pathlib

# The order in the file is the usual one; test_create also applies it reversed.
PROJECT = """\
kind: Project
name: team-a
quotas:
  H100-80GB: 16
"""

CLUSTER = """\
kind: Cluster
cluster_id: east
labels:
  region: us-east
"""

WORKLOAD = """\
kind: Workload
name: llama
project: team-a
replicas: 2
device_class: H100-80GB
serving:
  engine: vllm
  engine_version: "0.12.0"
  model: meta-llama/Llama-3.1-8B-Instruct
  tensor_parallel: 2
placement:
  clusters: [east]
"""

FLEET = "---\n".join([PROJECT, CLUSTER, WORKLOAD])


def write(directory: pathlib.Path, text: str, *, name: str = "fleet.yaml") -> str:
    path = directory / name
    path.write_text(text)
    return str(path)
