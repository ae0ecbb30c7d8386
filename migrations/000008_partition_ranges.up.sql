-- Partitions become ranges of ids instead of hash slices: partition i covers the ids
-- greater than lower_id (none: from the first) and at most upper_id (none: to the last),
-- in the id column's own order, with bounds taken from a sample of the ids when the run
-- starts. A hash slice made every partition visit every row, so a run of P partitions
-- read the table P times over; a range is read once, by keyset over the id's index.
ALTER TABLE run_partitions ADD COLUMN lower_id text, ADD COLUMN upper_id text;

-- A multi-partition scan still running from before cannot go on as ranges: its
-- partitions would overlap. It ends failed (what it wrote stays, each session whole);
-- the next scan picks its sessions up.
WITH stopped AS (
  UPDATE repair_runs SET status = 'failed', finished_at = now(),
    error = 'interrupted by the upgrade to id-range partitions (migration 8): start a new scan'
  WHERE status = 'running' AND partitions > 1 RETURNING id
)
UPDATE run_partitions p SET status = 'failed', error = 'interrupted by migration 8', updated_at = now()
FROM stopped WHERE p.run_id = stopped.id AND p.status IN ('pending', 'running');
