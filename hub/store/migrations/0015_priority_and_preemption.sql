-- Version 15: workload priority classes and the project preemption policy (docs/admission.md,
-- "Priority and preemption"). Existing workloads are 'normal'; existing projects cannot be
-- preempted by other projects' workloads.
ALTER TABLE workloads ADD COLUMN priority TEXT NOT NULL DEFAULT 'normal'
    CHECK (priority IN ('low', 'normal', 'high', 'critical'));
ALTER TABLE projects ADD COLUMN preemptible_by_other_projects INTEGER NOT NULL DEFAULT 0;
