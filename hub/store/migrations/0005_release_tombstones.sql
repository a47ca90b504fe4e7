-- Version 5: a tombstone says how the agent should let go of the deployment's DGD. A
-- deployment deleted while observed (never managed, or demoted) is *released*: the agent
-- forgets it and takes its labels off the DGD, which runs on; it deletes nothing, even when
-- it never applied the demotion (docs/authority.md). A deployment deleted while managed is
-- removed: its DGD is deleted. Existing tombstones keep the old meaning (removal).
ALTER TABLE tombstones ADD COLUMN release INTEGER NOT NULL DEFAULT 0;
