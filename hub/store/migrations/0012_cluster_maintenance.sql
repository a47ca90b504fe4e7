-- Version 12: an admin's maintenance marks on a cluster (docs/placement.md, "Cordon and
-- drain"): JSON {"cordoned": bool, "device_classes": [...], "nodes": [...], "draining": bool}.
-- Plane-written, like labels; '{}' is a cluster open to new placements.
ALTER TABLE clusters ADD COLUMN maintenance TEXT NOT NULL DEFAULT '{}';
