-- Who started a run (the OS user for the CLI, api:write for the API's token, cron for the
-- schedule, console:write for the console), and which tmend binary on which host wrote a
-- run or report row. A report's host is the process that handled the session, which for
-- a scan shared by several workers need not be the run's. Nullable: older rows have none.
ALTER TABLE repair_runs
    ADD COLUMN actor text,
    ADD COLUMN tmend_version text,
    ADD COLUMN host text;
ALTER TABLE repair_reports
    ADD COLUMN actor text,
    ADD COLUMN tmend_version text,
    ADD COLUMN host text;
