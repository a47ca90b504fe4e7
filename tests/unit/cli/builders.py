"""Small REST JSON objects as the hub returns them, with only the fields a test changes given."""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]


def workload(**overrides: Any) -> JsonObject:
    base: JsonObject = {
        "workload_id": "wl_1",
        "name": "llama",
        "project": "team-a",
        "replicas": 4,
        "device_class": "H100-80GB",
        "phase": "running",
        "degraded": False,
        "ready_replicas": 4,
        "deployments": [{"cluster_id": "east"}, {"cluster_id": "west"}],
        "priority": "normal",
    }
    return {**base, **overrides}


def deployment(**overrides: Any) -> JsonObject:
    base: JsonObject = {
        "deployment_id": "dep_1",
        "name": "llama.east",
        "cluster_id": "east",
        "desired_replicas": 2,
        "admitted_replicas": 2,
        "admission_phase": "running",
        "admission_reason": None,
        "generation": 3,
        "authority": "managed",
        "enabled": True,
        "serving_digest": "svg_ab12",
        "degraded": False,
        "status": {"ready_replicas": 2, "stale": False},
        "rollout": rollout(),
        "drift": [],
    }
    return {**base, **overrides}


def rollout(**overrides: Any) -> JsonObject:
    base: JsonObject = {
        "state": "converged",
        "generation": 3,
        "serving_digest": "svg_ab12",
        "ready_on_target": 2,
        "replicas_on_older": 0,
        "surge_replicas": 0,
    }
    return {**base, **overrides}


def difference(field: str = "replicas", declared: str = "4", observed: str = "2") -> JsonObject:
    return {"field": field, "declared": declared, "observed": observed}


def cluster(**overrides: Any) -> JsonObject:
    base: JsonObject = {
        "cluster_id": "east",
        "connected": True,
        "stale": False,
        "never_connected": False,
        "last_seen": "2026-01-31T12:00:05.123456789Z",
        "nodes": [{"node_id": "n1"}, {"node_id": "n2"}],
        "devices": {
            "H100-80GB": {"total": 16, "free": 12},
            "A100-40GB": {"total": 8, "free": 0},
        },
        "dgd_version": "v1beta1",
    }
    return {**base, **overrides}


def project(**overrides: Any) -> JsonObject:
    base: JsonObject = {
        "name": "team-a",
        "quotas": {"H100-80GB": 16},
        "usage": {"H100-80GB": {"used": 8, "reserved": 2, "limit": 16}},
    }
    return {**base, **overrides}


def replica(**overrides: Any) -> JsonObject:
    base: JsonObject = {
        "replica_id": "rep_1",
        "deployment_id": "dep_1",
        "name": "llama-worker-0",
        "node_id": "n1",
        "device_ids": ["GPU-a", "GPU-b"],
        "ready": True,
        "stale": False,
        "serving_digest": "svg_ab12",
    }
    return {**base, **overrides}


def allocation(**overrides: Any) -> JsonObject:
    base: JsonObject = {
        "replica_id": "rep_1",
        "pod_name": "llama-worker-0",
        "node_id": "n1",
        "device_ids": ["GPU-a", "GPU-b"],
        "project": "team-a",
    }
    return {**base, **overrides}


def discovered(**overrides: Any) -> JsonObject:
    base: JsonObject = {
        "discovered_id": "dsc_1",
        "name": "east.ml.legacy-qwen",
        "cluster_id": "east",
        "namespace": "ml",
        "dgd_name": "legacy-qwen",
        "state": "new",
        "gone": False,
        "backend_framework": "vllm",
        "services": [],
        "replicas": 2,
        "ready_replicas": 2,
        "imported_args": ["--model", "Qwen/Qwen2.5-7B-Instruct"],
        "engine_version": "0.9.1",
        "device_class": "H100-80GB",
        "devices_per_replica": 2,
        "workload_id": "",
    }
    return {**base, **overrides}


LEGACY_ARGS = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2"]


def review(**overrides: Any) -> JsonObject:
    """An adopted, observed deployment whose engine_args were never set: promotion refused."""
    base: JsonObject = {
        "deployment_id": "dep_1",
        "name": "legacy-qwen.east",
        "authority": "observed",
        "adopted": True,
        "differences": [difference("engine_args", "", " ".join(LEGACY_ARGS))],
        "restarts_pods": True,
        "summary": "taking control with these differences accepted restarts pods (new template)",
        "engine_args": [],
        "imported_args": LEGACY_ARGS,
        "live_args": LEGACY_ARGS,
        "declared_replicas": 2,
        "live_replicas": 2,
        "ready_replicas": 2,
        "declared_engine_version": "0.9.1",
        "live_engine_versions": ["0.9.1"],
        "declared_serving_digest": "svg_ab12",
        "live_digests": {"unlabeled": 2},
    }
    return {**base, **overrides}
