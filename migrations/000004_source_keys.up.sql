-- Versions, reports, holds and runs belong to a source: a table mapping, recorded as
-- schema.table(id_column,messages_column) with each name quoted as an identifier where
-- it needs to be (format's %I). Two tables with the same session ids never share them.
-- Rows from before this migration are given tmend's own sessions table in this schema
-- (rows of a user's table from before were recorded by session id alone and cannot be
-- told apart here).
DO $$
DECLARE
    own text := format('%I.%I(%I,%I)', current_schema(), 'sessions', 'id', 'messages');
BEGIN
    EXECUTE format('ALTER TABLE session_versions ADD COLUMN source_key text NOT NULL DEFAULT %L', own);
    EXECUTE format('ALTER TABLE session_holds ADD COLUMN source_key text NOT NULL DEFAULT %L', own);
    EXECUTE format('ALTER TABLE repair_reports ADD COLUMN source_key text NOT NULL DEFAULT %L', own);
    EXECUTE format('ALTER TABLE repair_runs ADD COLUMN source_key text NOT NULL DEFAULT %L', own);
END
$$;
-- The default stays for rows written by hand (tmend's store always names the source).

ALTER TABLE session_versions DROP CONSTRAINT session_versions_pkey;
ALTER TABLE session_versions ADD PRIMARY KEY (source_key, session_id, version);
ALTER TABLE session_holds DROP CONSTRAINT session_holds_pkey;
ALTER TABLE session_holds ADD PRIMARY KEY (source_key, session_id);
DROP INDEX repair_reports_session_idx;
CREATE INDEX repair_reports_session_idx ON repair_reports (source_key, session_id, created_at DESC, id DESC);
