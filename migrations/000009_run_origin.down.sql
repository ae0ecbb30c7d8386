ALTER TABLE repair_reports DROP COLUMN actor, DROP COLUMN tmend_version, DROP COLUMN host;
ALTER TABLE repair_runs DROP COLUMN actor, DROP COLUMN tmend_version, DROP COLUMN host;
