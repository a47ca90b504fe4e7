"""Records with every field off its default and each value distinct, for the tests that check
a record crosses a mapping (store, hub -> agent, API) whole: a field mixed up with another, or
dropped, shows."""

from __future__ import annotations

import dataclasses
from typing import Any

from hub import serving
from hub.model import Deployment, Serving

CONFIG = serving.normalize(Serving(engine="vllm", engine_version="0.11.0", model="m"))


def every_field_deployment(**changes: Any) -> Deployment:
    """A Deployment with every field set off its default (`changes` replace some)."""
    d = Deployment(
        deployment_id="dep_0000000000000001",
        workload_id="wl_0000000000000001",
        workload_name="chat",
        project="search",
        cluster_id="east",
        desired_replicas=5,
        admitted_replicas=4,
        admission_reason="insufficient_quota",
        admission_message="waits for 4 devices",
        generation=3,
        authority="observed",
        enabled=True,
        engine_args=("--max-model-len", "8192"),
        imported_args=("--enforce-eager",),
        serving=CONFIG,
        serving_digest=serving.digest(CONFIG),
        device_class="H100-80GB",
        devices_per_replica=2,
        revision=17,
        create_time=1700000000.25,
        update_time=1700000100.5,
        pending_since=7.0,
        surge_replicas=1,
        rolling=True,
        dgd_namespace="team-a",
        dgd_name="chat-dgd",
        adopted_from="dsc_1",
        topology="nvlink",
    )
    return dataclasses.replace(d, **changes)
