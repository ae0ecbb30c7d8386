// Package store is tmend's only door to Postgres: sessions, versions, runs and reports.
package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
		return nil, &redactedError{fmt.Sprintf("connect to database %s: %s", Describe(cfg), scrub(connectCause(err), databaseURL)), err}
	}
	return pool, nil
}

// connectCause says in one line why a connection failed and what to check: pgx's own
// text puts each address it tried on a line of its own, once per TLS mode, after a
// prefix that repeats the user and database Describe names.
func connectCause(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case pgerrcode.InvalidAuthorizationSpecification, pgerrcode.InvalidPassword:
			return pgErr.Error() + ": check the user and password in the URL, and that the server's pg_hba.conf admits them from this host"
		case pgerrcode.InvalidCatalogName:
			return pgErr.Error() + ": create the database, or name one that exists in the URL"
		}
		return pgErr.Error()
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.Error() + ": check the host name in the URL"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return opErr.Error() + ": is PostgreSQL running there, and does it accept connections at that address (listen_addresses, port, firewall)?"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		err = ce.Unwrap()
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// Describe names the database a config points at, for messages; it never includes the
// password.
func Describe(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("%q on %s:%d as %q", c.Database, c.Host, c.Port, c.User)
}
