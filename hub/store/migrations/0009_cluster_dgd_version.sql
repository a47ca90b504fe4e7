-- Version 9: the DynamoGraphDeployment API version the cluster's reconciling agent writes
-- (v1beta1 | v1alpha1), "none" when its API server serves neither, '' until reported
-- (docs/kubernetes.md, "DGD versions"). Agent-reported, like agent_version.
ALTER TABLE clusters ADD COLUMN dgd_version TEXT NOT NULL DEFAULT '';
