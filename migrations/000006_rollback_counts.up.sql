-- A rollback run counts restored and refused sessions as such, not as repaired and
-- conflict; earlier rollback runs are moved over.
ALTER TABLE repair_runs
    ADD COLUMN num_restored integer NOT NULL DEFAULT 0 CHECK (num_restored >= 0),
    ADD COLUMN num_refused  integer NOT NULL DEFAULT 0 CHECK (num_refused >= 0);
UPDATE repair_runs SET num_restored = num_repaired, num_refused = num_conflict, num_repaired = 0, num_conflict = 0
WHERE mode = 'rollback';
