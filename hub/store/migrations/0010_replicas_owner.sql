-- Version 10: who sets a deployment's replicas on its cluster, as the agent reported it
-- (docs/kubernetes.md, "Scaling adapters"): '' Wingsmith in the DGD, 'adapter' Wingsmith
-- through Dynamo's scaling adapter, 'autoscaler:<field manager>' an autoscaler that owns them
-- (then replicas are no drift). Cluster-written, like the rest of deployment_reports.
ALTER TABLE deployment_reports ADD COLUMN replicas_owner TEXT NOT NULL DEFAULT '';
