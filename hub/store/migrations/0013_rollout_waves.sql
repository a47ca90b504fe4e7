-- Rollout waves (docs/rollouts.md "Waves"): a workload's rollout policy and the state of the
-- serving change it is rolling out cluster by cluster. rollout_state is its own column so the
-- periodic pass finds the rollouts to evaluate without reading every workload.
ALTER TABLE workloads ADD COLUMN rollout_policy TEXT NOT NULL DEFAULT '{}';
ALTER TABLE workloads ADD COLUMN rollout_state TEXT NOT NULL DEFAULT '';
-- JSON: target and previous digests, the previous serving config (an abort restores it),
-- when each cluster's wave started, why it paused.
ALTER TABLE workloads ADD COLUMN rollout TEXT NOT NULL DEFAULT '{}';
CREATE INDEX workloads_rollout_state ON workloads (rollout_state);
