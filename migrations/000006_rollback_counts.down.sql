-- Rollback runs go back to counting restored sessions as repaired and refused ones as
-- conflict.
UPDATE repair_runs SET num_repaired = num_restored, num_conflict = num_refused WHERE mode = 'rollback';
ALTER TABLE repair_runs DROP COLUMN num_restored, DROP COLUMN num_refused;
