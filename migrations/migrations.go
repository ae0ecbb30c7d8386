// Package migrations holds tmend's schema as golang-migrate SQL files, embedded in the
// binary, and the few operations the CLI and tests run with them.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// FS holds the migration files, named NNNNNN_name.up.sql / .down.sql, always in pairs.
//
//go:embed *.sql
var FS embed.FS

// DirtyError reports a database whose last migration failed halfway.
type DirtyError struct{ Version uint }

func (e *DirtyError) Error() string {
	return fmt.Sprintf("database schema is dirty at version %d: a migration failed halfway; "+
		"fix the schema by hand, then run `tmend migrate force %d` (or the version before it)",
		e.Version, e.Version)
}

// Latest returns the highest migration version embedded in this binary.
func Latest() uint {
	var latest uint
	names, _ := fs.Glob(FS, "*.up.sql")
	for _, n := range names {
		if v, ok := versionOf(n); ok && v > latest {
			latest = v
		}
	}
	return latest
}

var versionRE = regexp.MustCompile(`^(\d+)_`)

func versionOf(name string) (uint, bool) {
	m := versionRE.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseUint(m[1], 10, 64)
	return uint(v), err == nil
}

// Versions lists the embedded migration versions in ascending order.
func Versions() []uint {
	names, _ := fs.Glob(FS, "*.up.sql")
	var vs []uint
	for _, n := range names {
		if v, ok := versionOf(n); ok {
			vs = append(vs, v)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	return vs
}

// Up applies every pending migration in schema, creating the schema first, and then
// River's. No change is success.
func Up(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if err := withMigrate(ctx, pool, schema, func(m *migrate.Migrate) error { return m.Up() }); err != nil {
		return err
	}
	return riverUp(ctx, pool, schema)
}

// Down reverts the given number of tmend's migrations; steps <= 0 reverts all of them
// and removes River's tables too.
func Down(ctx context.Context, pool *pgxpool.Pool, schema string, steps int) error {
	err := withMigrate(ctx, pool, schema, func(m *migrate.Migrate) error {
		if steps <= 0 {
			return m.Down()
		}
		return m.Steps(-steps)
	})
	if err != nil || steps > 0 {
		return err
	}
	return riverDown(ctx, pool, schema)
}

// Force sets the recorded version without running anything and clears the dirty flag.
func Force(ctx context.Context, pool *pgxpool.Pool, schema string, version int) error {
	return withMigrate(ctx, pool, schema, func(m *migrate.Migrate) error { return m.Force(version) })
}

// Version returns the schema's current version; 0 with no error means no migration ran.
// It only reads: a schema or migrations table that does not exist is version 0, and
// neither is created (only Up, Down and Force create anything).
func Version(ctx context.Context, pool *pgxpool.Pool, schema string) (version uint, dirty bool, err error) {
	const tableSQL = `SELECT to_regclass(format('%I.%I', $1::text, $2::text)) IS NOT NULL`
	var exists bool
	// Each statement here runs once a process: sent without preparing it first, one
	// round trip instead of two.
	if err := pool.QueryRow(ctx, tableSQL, pgx.QueryExecModeExec, schema, migrationsTable).Scan(&exists); err != nil {
		return 0, false, fmt.Errorf("look up migrations table in schema %q: %w", schema, err)
	}
	if !exists {
		return 0, false, nil
	}
	var v int64
	err = pool.QueryRow(ctx, "SELECT version, dirty FROM "+pgx.Identifier{schema, migrationsTable}.Sanitize()+" LIMIT 1", pgx.QueryExecModeExec).Scan(&v, &dirty)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("read schema version of %q: %w", schema, err)
	case v < 0: // golang-migrate's "no version"
		return 0, dirty, nil
	}
	return uint(v), dirty, nil
}

// Check refuses a schema that is not at this binary's version: dirty, older (run
// `tmend migrate up`) or newer (upgrade tmend).
func Check(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	v, dirty, err := Version(ctx, pool, schema)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	latest := Latest()
	switch {
	case dirty:
		return &DirtyError{Version: v}
	case v < latest:
		return fmt.Errorf("schema %q is at version %d and this tmend needs %d: run `tmend migrate up`", schema, v, latest)
	case v > latest:
		return fmt.Errorf("schema %q is at version %d, newer than this tmend knows (%d): upgrade tmend", schema, v, latest)
	}
	rv, err := RiverVersion(ctx, pool, schema)
	if err != nil {
		return err
	}
	if rl := RiverLatest(); rv < rl {
		return fmt.Errorf("the River tables in schema %q are at version %d and this tmend needs %d: run `tmend migrate up`", schema, rv, rl)
	}
	return nil
}

// migrationsTable is golang-migrate's table, in tmend's schema.
const migrationsTable = "schema_migrations"

// ensureSchema creates schema unless it exists. CREATE SCHEMA IF NOT EXISTS would not do:
// it needs the CREATE privilege on the database even when the schema is there, which a
// role that was given its own schema (deploy/README.md) does not have.
func ensureSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	const existsSQL = `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`
	var exists bool
	if err := pool.QueryRow(ctx, existsSQL, schema).Scan(&exists); err != nil {
		return fmt.Errorf("look up schema %q: %w", schema, err)
	}
	if exists {
		return nil
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("create schema %q: %w", schema, err)
	}
	return nil
}

// withMigrate runs fn with a migrate instance on schema. Closing that instance or its
// database handle can fail too; such an error is returned when nothing else went wrong.
func withMigrate(ctx context.Context, pool *pgxpool.Pool, schema string, fn func(*migrate.Migrate) error) (err error) {
	if err := ensureSchema(ctx, pool, schema); err != nil {
		return err
	}
	src, err := iofs.New(FS, ".")
	if err != nil {
		return fmt.Errorf("open embedded migrations: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close migration database handle: %w", cerr)
		}
	}()
	driver, err := migratepgx.WithInstance(db, &migratepgx.Config{SchemaName: schema, MigrationsTable: migrationsTable})
	if err != nil {
		return fmt.Errorf("open migration driver: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		return fmt.Errorf("set up migrations: %w", err)
	}
	defer func() {
		srcErr, dbErr := m.Close()
		if cerr := errors.Join(srcErr, dbErr); cerr != nil && err == nil {
			err = fmt.Errorf("close migrations: %w", cerr)
		}
	}()

	// Forward cancellation so an interrupted `migrate up` stops between migrations.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			m.GracefulStop <- true
		case <-done:
		}
	}()

	err = fn(m)
	var dirty migrate.ErrDirty
	switch {
	case err == nil, errors.Is(err, migrate.ErrNoChange):
		return ctx.Err()
	case errors.As(err, &dirty):
		return &DirtyError{Version: uint(dirty.Version)}
	default:
		return err
	}
}
