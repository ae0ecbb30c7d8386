DROP TABLE session_compactions;
DELETE FROM repair_reports WHERE status IN ('compacted', 'would_compact', 'compact_rejected');
ALTER TABLE repair_reports DROP CONSTRAINT repair_reports_status_check;
ALTER TABLE repair_reports ADD CONSTRAINT repair_reports_status_check CHECK (status IN (
    'repaired', 'would_repair', 'pending', 'conflict', 'failed',
    'unparseable', 'unknown_dialect', 'unsupported', 'too_large', 'rolled_back', 'rollback_refused'));
