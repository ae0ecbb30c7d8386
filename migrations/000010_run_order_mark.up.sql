-- For a source that keeps a row per message ordered by a sequence (LangChain's SERIAL
-- id), the order column's largest value when the run started: the next incremental run
-- reads the sessions with a row above the mark of a completed run before its window.
-- NULL for other sources and older rows.
ALTER TABLE repair_runs ADD COLUMN order_mark bigint;
