// Package store is tmend's only door to Postgres: sessions, versions, runs and reports.
package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the schema tmend's own tables live in.
const DefaultSchema = "tmend"

// ParseConfig builds a pool configuration with tmend's session defaults: search_path set
// to schema, application_name=tmend, and statement and idle-in-transaction timeouts, each
// unless the URL already sets it.
func ParseConfig(databaseURL, schema string) (*pgxpool.Config, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, parseError(err, databaseURL)
	}
	// The simple protocol sends every argument as text: jsonb and bytea values, arrays
	// and batched statements break in ways that name none of this.
	if cfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeSimpleProtocol {
		return nil, fmt.Errorf("parse database url %s: default_query_exec_mode=simple_protocol is not supported: "+
			"tmend needs the extended protocol (PgBouncer 1.21 and later keep it in transaction mode with max_prepared_statements)",
			Redact(databaseURL))
	}
	params := cfg.ConnConfig.RuntimeParams
	params["search_path"] = pgx.Identifier{schema}.Sanitize() + ", public"
	setDefault(params, "application_name", "tmend")
	setDefault(params, "statement_timeout", "300000")
	setDefault(params, "idle_in_transaction_session_timeout", "120000")
	return cfg, nil
}

func setDefault(m map[string]string, k, v string) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

// Connect opens a pool and checks that the server answers.
func Connect(ctx context.Context, databaseURL, schema string) (*pgxpool.Pool, error) {
	return ConnectSized(ctx, databaseURL, schema, 0)
}

// ConnectSized is Connect with a pool of at least minMax connections, unless the URL
// sets pool_max_conns: a process working partitions needs one per worker.
func ConnectSized(ctx context.Context, databaseURL, schema string, minMax int) (*pgxpool.Pool, error) {
	cfg, err := ParseConfig(databaseURL, schema)
	if err != nil {
		return nil, err
	}
	if minMax > int(cfg.MaxConns) && !strings.Contains(databaseURL, "pool_max_conns") {
		cfg.MaxConns = int32(min(minMax, 1000))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, &redactedError{"open database pool: " + scrub(err.Error(), databaseURL), err}
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, &redactedError{fmt.Sprintf("connect to database %s: %s", Describe(cfg), scrub(err.Error(), databaseURL)), err}
	}
	return pool, nil
}

// Describe names the database a config points at, for messages; it never includes the
// password.
func Describe(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("%q on %s:%d as %q", c.Database, c.Host, c.Port, c.User)
}
