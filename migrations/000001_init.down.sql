DROP TABLE IF EXISTS scan_state;
DROP TABLE IF EXISTS repair_reports;
DROP TABLE IF EXISTS session_versions;
DROP TABLE IF EXISTS repair_runs;
DROP TABLE IF EXISTS sessions;
