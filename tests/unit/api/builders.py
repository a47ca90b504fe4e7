"""Builders of fully populated resources: every field set, so a round trip proves them all."""

from __future__ import annotations

from google.protobuf import timestamp_pb2

from wingsmith.v1 import resources_pb2 as pb


def _time(seconds: int, nanos: int = 0) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


def serving_config() -> pb.ServingConfig:
    return pb.ServingConfig(
        engine=pb.ENGINE_SGLANG,
        engine_version="0.4.6",
        model="meta-llama/Llama-3.1-70B-Instruct",
        tensor_parallel=4,
        pipeline_parallel=2,
        expert_parallel=2,
        context_length=32768,
        quantization="fp8",
        kv_cache=pb.KvCacheConfig(
            dtype="fp8", gpu_memory_utilization=0.9, block_size=32, disable_prefix_caching=True
        ),
        engine_args=["--max-num-seqs", "256"],
        mode=pb.SERVING_MODE_DISAGGREGATED,
        disaggregation=pb.Disaggregation(prefill_workers=1, decode_workers=3),
        router_mode=pb.ROUTER_MODE_ROUND_ROBIN,
        image="nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.4.6",
    )


def workload() -> pb.Workload:
    return pb.Workload(
        workload_id="wl_1",
        name="llama-70b",
        project="team-a",
        replicas=6,
        device_class="H100-80GB",
        serving=serving_config(),
        placement=pb.Placement(
            clusters=["east", "west"],
            cluster_selector={"tier": "gold"},
            topology=pb.TOPOLOGY_NVLINK_DOMAIN,
            failover=pb.Failover(toleration_seconds=300, stabilization_seconds=600),
        ),
        phase=pb.ADMISSION_PHASE_RUNNING,
        degraded=True,
        ready_replicas=5,
        deployments=[
            pb.DeploymentSummary(
                deployment_id="dep_1",
                name="llama-70b.east",
                cluster_id="east",
                desired_replicas=3,
                ready_replicas=2,
                admission_phase=pb.ADMISSION_PHASE_PENDING,
                admission_reason=pb.ADMISSION_REASON_INSUFFICIENT_CAPACITY,
                generation=2**40,
                serving_digest="svg_ab12",
                stale=True,
                live_digests={"svg_ab12": 1},
                rollout_state=pb.ROLLOUT_STATE_CONVERGED,
                authority=pb.AUTHORITY_MANAGED,
            )
        ],
        devices_per_replica=8,
        create_time=_time(1_700_000_000),
        update_time=_time(1_700_000_100, 500_000_000),
        rollout=pb.RolloutPolicy(max_clusters_in_flight=1, wave_deadline_seconds=300),
        rollout_status=pb.WorkloadRollout(
            state=pb.ROLLOUT_STATE_PAUSED,
            target_serving_digest="svg_cd34",
            previous_serving_digest="svg_ab12",
            reason="wave_deadline_exceeded",
            message="not ready on svg_cd34 within the wave deadline of 300s: east (0/2 ready)",
            clusters=[
                pb.WaveStatus(
                    cluster_id="east",
                    state=pb.ROLLOUT_STATE_ROLLING,
                    change_time=_time(1_700_000_050),
                )
            ],
            start_time=_time(1_700_000_040),
            update_time=_time(1_700_000_360),
        ),
        failovers=[
            pb.FailoverStatus(
                cluster_id="west",
                cause="stale",
                state="recovering",
                start_time=_time(1_700_000_010),
                replicas=2,
                stand_ins={"east": 2},
                failback_time=_time(1_700_000_400),
                end_time=_time(1_700_000_500),
                message="cluster west is back and its replicas ready",
            )
        ],
        dry_run=pb.DryRunResult(
            summary="1 deployment: 1 scaled, 1 waits (insufficient_capacity)",
            changes=[
                pb.DeploymentChange(
                    deployment_id="dep_1",
                    name="llama-70b.east",
                    workload_name="llama-70b",
                    project="team-a",
                    cluster_id="east",
                    effects=["scaled", "waits"],
                    desired_replicas_before=2,
                    desired_replicas=3,
                    admitted_replicas_before=2,
                    admitted_replicas=2,
                    admission_phase_before=pb.ADMISSION_PHASE_RUNNING,
                    admission_phase=pb.ADMISSION_PHASE_RUNNING,
                    admission_reason=pb.ADMISSION_REASON_INSUFFICIENT_CAPACITY,
                    admission_message="1 replica waits for capacity",
                    serving_digest_before="svg_ab12",
                    serving_digest="svg_ab12",
                    generation_before=2**40,
                    generation=2**40,
                    ready_replicas=2,
                )
            ],
        ),
        priority=pb.PRIORITY_HIGH,
        labels={"app": "chat", "example.com/tier": ""},
    )


def deployment() -> pb.Deployment:
    return pb.Deployment(
        deployment_id="dep_1",
        name="llama-70b.east",
        workload_id="wl_1",
        workload_name="llama-70b",
        project="team-a",
        cluster_id="east",
        desired_replicas=3,
        admitted_replicas=2,
        admission_phase=pb.ADMISSION_PHASE_ADMITTED,
        admission_reason=pb.ADMISSION_REASON_INSUFFICIENT_QUOTA,
        admission_message="1 replica waits for quota",
        generation=2**53 + 1,  # above float precision: must stay exact
        authority=pb.AUTHORITY_OBSERVED,
        enabled=True,
        engine_args=["--enforce-eager"],
        imported_args=["--model", "x"],
        serving_digest="svg_ab12",
        device_class="H100-80GB",
        devices_per_replica=8,
        serving=serving_config(),
        status=pb.DeploymentStatus(
            phase="successful",
            reason="ok",
            message="all good",
            ready_replicas=2,
            desired_replicas=3,
            stale=True,
            observe_time=_time(1_700_000_200),
            applied_replicas=2,
        ),
        live_digests={"svg_ab12": 2, "svg_0000": 1},
        degraded=True,
        sync=pb.SyncState(
            revision=41, applied=True, rejected_error="bad flag", rejected_generation=3
        ),
        create_time=_time(1_700_000_000),
        update_time=_time(1_700_000_300),
        rollout=pb.RolloutStatus(
            state=pb.ROLLOUT_STATE_ROLLING,
            generation=3,
            serving_digest="svg_ab12",
            ready_on_target=2,
            replicas_on_older=1,
            surge_replicas=1,
        ),
        drift=[pb.Difference(field="replicas", declared="3", observed="2")],
        adopted_from=pb.AdoptedFrom(discovered_id="dsc_1", namespace="ml", name="legacy"),
        topology_violations=[
            pb.TopologyViolation(replica_id="rep_1", name="pod-1", reason="spans 2 domains")
        ],
        applied=pb.AppliedObject(
            deployment_id="dep_1",
            api_version="nvidia.com/v1alpha1",
            kind="DynamoGraphDeployment",
            namespace="wingsmith",
            name="llama-70b",
            digest="sha256:" + "0" * 64,
            observe_time=_time(1_700_000_250),
            truncated=True,
            body='{"kind":"DynamoGraphDeployment"}',
        ),
        failover_replicas=2,
        failover_for=["west"],
        priority=pb.PRIORITY_LOW,
        dry_run=pb.DryRunResult(
            summary="1 deployment: 1 disabled",
            changes=[pb.DeploymentChange(name="llama-70b.east", effects=["disabled"])],
        ),
    )
