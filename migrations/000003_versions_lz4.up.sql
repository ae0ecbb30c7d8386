-- Saved versions are written on every repair; lz4 costs Postgres far less CPU to compress
-- than the default pglz (BENCHMARKS.md). Servers without it (built without lz4, or before
-- PostgreSQL 14) keep pglz.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE session_versions ALTER COLUMN content SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'lz4 is not available on this server; session versions stay compressed with pglz';
END
$$;
