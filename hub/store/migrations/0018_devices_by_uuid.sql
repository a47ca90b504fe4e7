-- Version 18: a device UUID is bound to the node that verified it first (docs/security.md "A
-- cluster reports only its own devices"): every changed node report looks its UUIDs up across
-- clusters, so they need an index of their own.
CREATE INDEX devices_by_uuid ON devices (uuid);
