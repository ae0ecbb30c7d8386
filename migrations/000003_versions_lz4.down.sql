DO $$
BEGIN
    EXECUTE 'ALTER TABLE session_versions ALTER COLUMN content SET COMPRESSION default';
EXCEPTION WHEN syntax_error THEN
    NULL; -- before PostgreSQL 14 there is nothing to undo
END
$$;
