-- Wingsmith hub schema, version 1.
-- Plane-written tables: projects, quotas, clusters (identity, labels), workloads, deployments,
-- tombstones. Cluster-written tables: deployment_reports, deployment_rejections, replicas,
-- nodes, devices, allocations. Times are Unix seconds (REAL); observation versions are the
-- agent's Unix nanoseconds (INTEGER). JSON columns hold canonical JSON text.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE projects (
    name        TEXT PRIMARY KEY,
    create_time REAL NOT NULL,
    update_time REAL NOT NULL
) STRICT;

CREATE TABLE quotas (
    project      TEXT NOT NULL REFERENCES projects(name) ON DELETE CASCADE,
    device_class TEXT NOT NULL,
    device_limit INTEGER NOT NULL CHECK (device_limit >= 0),
    PRIMARY KEY (project, device_class)
) STRICT;

CREATE TABLE clusters (
    cluster_id        TEXT PRIMARY KEY,
    labels            TEXT NOT NULL,
    token_hash        TEXT NOT NULL UNIQUE,
    create_time       REAL NOT NULL,
    -- Desired-state revision: bumped whenever a deployment's spec for this cluster changes.
    desired_revision  INTEGER NOT NULL DEFAULT 0,
    -- Highest revision the agent acknowledged.
    applied_revision  INTEGER NOT NULL DEFAULT 0,
    -- Tombstones at or below this revision were pruned: an agent behind it gets a snapshot.
    tombstone_floor   INTEGER NOT NULL DEFAULT 0,
    last_seen         REAL,
    connected_session TEXT,
    agent_version     TEXT NOT NULL DEFAULT '',
    read_only         INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE workloads (
    workload_id  TEXT PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    project      TEXT NOT NULL REFERENCES projects(name),
    replicas     INTEGER NOT NULL CHECK (replicas >= 0),
    device_class TEXT NOT NULL,
    serving      TEXT NOT NULL,
    placement    TEXT NOT NULL,
    create_time  REAL NOT NULL,
    update_time  REAL NOT NULL
) STRICT;

CREATE TABLE deployments (
    deployment_id       TEXT PRIMARY KEY,
    workload_id         TEXT NOT NULL REFERENCES workloads(workload_id) ON DELETE CASCADE,
    cluster_id          TEXT NOT NULL REFERENCES clusters(cluster_id),
    project             TEXT NOT NULL,
    desired_replicas    INTEGER NOT NULL CHECK (desired_replicas >= 0),
    admitted_replicas   INTEGER NOT NULL DEFAULT 0 CHECK (admitted_replicas >= 0),
    admission_reason    TEXT NOT NULL DEFAULT '',
    admission_message   TEXT NOT NULL DEFAULT '',
    -- Admission order: when the deployment last started waiting.
    pending_since       REAL NOT NULL,
    generation          INTEGER NOT NULL DEFAULT 1,
    authority           TEXT NOT NULL CHECK (authority IN ('managed', 'observed')),
    enabled             INTEGER NOT NULL DEFAULT 1,
    engine_args         TEXT NOT NULL DEFAULT '[]',
    imported_args       TEXT NOT NULL DEFAULT '[]',
    serving             TEXT NOT NULL,
    serving_digest      TEXT NOT NULL,
    device_class        TEXT NOT NULL,
    devices_per_replica INTEGER NOT NULL CHECK (devices_per_replica >= 1),
    revision            INTEGER NOT NULL,
    create_time         REAL NOT NULL,
    update_time         REAL NOT NULL,
    UNIQUE (workload_id, cluster_id)
) STRICT;
CREATE INDEX deployments_by_cluster ON deployments (cluster_id, revision);

CREATE TABLE tombstones (
    cluster_id    TEXT NOT NULL REFERENCES clusters(cluster_id) ON DELETE CASCADE,
    deployment_id TEXT NOT NULL,
    revision      INTEGER NOT NULL,
    delete_time   REAL NOT NULL,
    PRIMARY KEY (cluster_id, deployment_id)
) STRICT;
CREATE INDEX tombstones_by_revision ON tombstones (cluster_id, revision);

CREATE TABLE deployment_reports (
    deployment_id      TEXT PRIMARY KEY REFERENCES deployments(deployment_id) ON DELETE CASCADE,
    observe_ns         INTEGER NOT NULL,
    -- 0 while the agent knows the deployment but has nothing to say of it yet (status null).
    has_status         INTEGER NOT NULL,
    phase              TEXT NOT NULL,
    reason             TEXT NOT NULL,
    message            TEXT NOT NULL,
    ready_replicas     INTEGER NOT NULL,
    desired_replicas   INTEGER NOT NULL,
    applied_generation INTEGER NOT NULL,
    absent             INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE deployment_rejections (
    deployment_id TEXT PRIMARY KEY REFERENCES deployments(deployment_id) ON DELETE CASCADE,
    revision      INTEGER NOT NULL,
    generation    INTEGER NOT NULL,
    error         TEXT NOT NULL,
    reject_time   REAL NOT NULL
) STRICT;

CREATE TABLE replicas (
    replica_id     TEXT PRIMARY KEY,
    deployment_id  TEXT NOT NULL REFERENCES deployments(deployment_id) ON DELETE CASCADE,
    cluster_id     TEXT NOT NULL,
    namespace      TEXT NOT NULL,
    name           TEXT NOT NULL,
    node_id        TEXT NOT NULL,
    ready          INTEGER NOT NULL,
    serving_digest TEXT NOT NULL,
    engine_version TEXT NOT NULL,
    role           TEXT NOT NULL,
    observe_ns     INTEGER NOT NULL,
    UNIQUE (cluster_id, namespace, name)
) STRICT;
CREATE INDEX replicas_by_deployment ON replicas (deployment_id);

CREATE TABLE nodes (
    cluster_id      TEXT NOT NULL REFERENCES clusters(cluster_id) ON DELETE CASCADE,
    node_id         TEXT NOT NULL,
    observe_ns      INTEGER NOT NULL,
    inventory_error TEXT NOT NULL DEFAULT '',
    -- The node left; the row stays as the high-water mark of its observations.
    absent          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (cluster_id, node_id)
) STRICT;

CREATE TABLE devices (
    cluster_id    TEXT NOT NULL,
    node_id       TEXT NOT NULL,
    uuid          TEXT NOT NULL,
    name          TEXT NOT NULL,
    memory_bytes  INTEGER NOT NULL,
    pci_bus_id    TEXT NOT NULL,
    device_class  TEXT NOT NULL,
    healthy       INTEGER NOT NULL,
    health_reason TEXT NOT NULL,
    verified      INTEGER NOT NULL,
    nvlink_domain TEXT NOT NULL,
    parent_uuid   TEXT NOT NULL,
    PRIMARY KEY (cluster_id, uuid),
    FOREIGN KEY (cluster_id, node_id) REFERENCES nodes(cluster_id, node_id) ON DELETE CASCADE
) STRICT;
CREATE INDEX devices_by_node ON devices (cluster_id, node_id);

CREATE TABLE allocations (
    cluster_id    TEXT NOT NULL,
    node_id       TEXT NOT NULL,
    namespace     TEXT NOT NULL,
    pod_name      TEXT NOT NULL,
    device_id     TEXT NOT NULL,
    resource_name TEXT NOT NULL,
    PRIMARY KEY (cluster_id, node_id, namespace, pod_name, device_id),
    FOREIGN KEY (cluster_id, node_id) REFERENCES nodes(cluster_id, node_id) ON DELETE CASCADE
) STRICT;
CREATE INDEX allocations_by_pod ON allocations (cluster_id, namespace, pod_name);
CREATE INDEX allocations_by_device ON allocations (cluster_id, device_id);
