-- Unsupported sessions were left alone, as unknown_dialect ones are: keep their rows
-- under that status rather than losing them.
UPDATE repair_reports SET status = 'unknown_dialect' WHERE status = 'unsupported';
ALTER TABLE repair_reports DROP CONSTRAINT repair_reports_status_check;
ALTER TABLE repair_reports ADD CONSTRAINT repair_reports_status_check CHECK (status IN (
    'repaired', 'would_repair', 'pending', 'conflict', 'failed',
    'unparseable', 'unknown_dialect', 'too_large', 'rolled_back', 'rollback_refused'));
