"""The hub's Prometheus metrics, on a registry of its own (one per hub, so tests can run many).

- wingsmith_agents_connected: open agent streams;
- wingsmith_stream_messages_total{direction, type}: stream messages by type;
- wingsmith_desired_deployments_sent_total{kind}: deployment specs sent (kind: snapshot|delta),
  and wingsmith_desired_bytes_sent_total: their size, so a resend after a restart shows;
- wingsmith_admission_decisions_total{result, reason}: decisions that changed a deployment's
  outcome (admitted or surge replicas, or reason): result admitted | waiting | released. A
  deployment that keeps waiting for the same reason counts once, when it started waiting;
- wingsmith_admission_evaluations_total{result, reason}: every deployment an admission pass
  evaluated, changed or not (the work admission does; a waiting deployment counts once per
  pass that re-evaluates it);
- wingsmith_deployments{phase}: deployments by admission phase, computed at most every 15 s
  (a view of every deployment: at 10,000 of them that is seconds of the hub's loop);
- wingsmith_desired_delivery_seconds: from a commit that changed a cluster's desired state
  until a stream of that cluster was handed the delta and gRPC took it (the hub's share of
  how long an agent waits to hear of a change; a slow agent's coalesced delta counts from
  when it asked again);
- wingsmith_clusters_behind: clusters whose agent has not applied the latest revision;
- wingsmith_observation_records_total, wingsmith_observation_batches_total: persisted by ingest;
- wingsmith_observation_backlog: batches queued for ingest.

What an operator alerts on (docs/operations.md "Monitoring"; deploy/monitoring/ holds the rules):
- per cluster (label `cluster`), read from the store by hub/service/fleet.py at most every
  `fleet_interval_s`: wingsmith_cluster_connected, _stale, _last_seen_timestamp_seconds,
  _last_seen_age_seconds, _desired_revision, _applied_revision, _revision_lag, _leader_term,
  wingsmith_cluster_devices{cluster, device_class, state}; and counted by this hub:
  wingsmith_cluster_stream_opens_total{cluster};
- per project and class: wingsmith_project_quota_devices, _used_devices, _reserved_devices,
  wingsmith_pending_deployments / wingsmith_pending_devices / wingsmith_pending_oldest_age_seconds
  {project, device_class, reason} (Kueue's pending_workloads), and the histogram
  wingsmith_admission_wait_seconds{project, device_class} (Kueue's admission_wait_time_seconds);
- RED of the control API: wingsmith_http_requests_total{route, method, code},
  wingsmith_http_request_duration_seconds{route, method}, wingsmith_grpc_server_handled_total
  {grpc_service, grpc_method, grpc_code}, wingsmith_grpc_server_handling_seconds{grpc_service,
  grpc_method}; the store: wingsmith_store_transaction_seconds{kind},
  wingsmith_store_lock_wait_seconds;
- process and Python runtime collectors, wingsmith_build_info{version, python_version}.

Label values are bounded by the fleet, never by requests: cluster ids x device classes x 5
states; projects x classes x admission reasons; REST route templates (not paths) x methods x
codes; the ControlService's RPCs x gRPC codes. No `*_created` samples are exported.

Its parts, by role: instruments.py the counters and histograms the service's hooks and the
edges feed (`HubMetrics`); fleet.py the gauges read from the store, cached and rendered per
read of the fleet rather than per scrape; registry.py the hub's registry and its exposition;
timing.py the store wrapper that times every transaction (`TimedStore`).
"""

from __future__ import annotations

from hub.metrics.instruments import HubMetrics
from hub.metrics.registry import exposition
from hub.metrics.timing import TimedStore

__all__ = ["HubMetrics", "TimedStore", "exposition"]
