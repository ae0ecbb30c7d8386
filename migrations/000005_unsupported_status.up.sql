-- A transcript holding a call or result in a shape tmend does not know is left alone and
-- reported as unsupported.
ALTER TABLE repair_reports DROP CONSTRAINT repair_reports_status_check;
ALTER TABLE repair_reports ADD CONSTRAINT repair_reports_status_check CHECK (status IN (
    'repaired', 'would_repair', 'pending', 'conflict', 'failed',
    'unparseable', 'unknown_dialect', 'unsupported', 'too_large', 'rolled_back', 'rollback_refused'));
