-- Back to keying by session id alone, which is only possible while no two sources share
-- a session id.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM session_versions GROUP BY session_id, version HAVING count(DISTINCT source_key) > 1)
       OR EXISTS (SELECT 1 FROM session_holds GROUP BY session_id HAVING count(*) > 1) THEN
        RAISE EXCEPTION 'sessions of several sources share ids; delete the versions and holds of all but one source before migrating down';
    END IF;
END
$$;
DROP INDEX repair_reports_session_idx;
CREATE INDEX repair_reports_session_idx ON repair_reports (session_id, created_at DESC, id DESC);
ALTER TABLE session_holds DROP CONSTRAINT session_holds_pkey;
ALTER TABLE session_holds ADD PRIMARY KEY (session_id);
ALTER TABLE session_versions DROP CONSTRAINT session_versions_pkey;
ALTER TABLE session_versions ADD PRIMARY KEY (session_id, version);
ALTER TABLE repair_runs DROP COLUMN source_key;
ALTER TABLE repair_reports DROP COLUMN source_key;
ALTER TABLE session_holds DROP COLUMN source_key;
ALTER TABLE session_versions DROP COLUMN source_key;
