-- Version 20: labels on workloads and projects (docs/rest.md "Labels"), a JSON object each.
-- Lists select by them in the service layer, so no statement reads into them: one column.
ALTER TABLE workloads ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
ALTER TABLE projects ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
