-- Version 16: a deployment's fields that no statement reads (filters, joins, sums, order) move
-- into one JSON column, `body` (hub/store/deployments.py derives both forms from the model's
-- fields): a new Deployment field with a default then needs no migration and no column list.
-- The serving config and the two times keep their columns: with the times out of it, a
-- workload's deployments share one body text, parsed once per distinct text as serving is.
ALTER TABLE deployments ADD COLUMN body TEXT NOT NULL DEFAULT '{}';
UPDATE deployments SET body = json_object(
    'adopted_from', adopted_from,
    'dgd_name', dgd_name,
    'dgd_namespace', dgd_namespace,
    'engine_args', json(engine_args),
    'imported_args', json(imported_args)
);
ALTER TABLE deployments DROP COLUMN adopted_from;
ALTER TABLE deployments DROP COLUMN dgd_name;
ALTER TABLE deployments DROP COLUMN dgd_namespace;
ALTER TABLE deployments DROP COLUMN engine_args;
ALTER TABLE deployments DROP COLUMN imported_args;
