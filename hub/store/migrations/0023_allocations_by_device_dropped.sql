-- Version 23: allocations lose their (cluster_id, device_id) index. Every report of a pod
-- that came or went deletes and inserts its allocation rows, one per device, and each row
-- kept four B-trees current (the table, its key, by pod, by device); this one served only
-- the cordoned nodes' idle devices, which now look a device's allocations up on its own
-- node, by the key (cluster_id, node_id, ...): an allocation is only ever stored on the
-- node of its device (hub/store/nodes.py `_own_allocations`). Ingest at 2,000 agents:
-- the allocations' writes 15-20% cheaper (docs/benchmark.md "Ingest at 2,000 agents: what
-- every record cost").
DROP INDEX allocations_by_device;
