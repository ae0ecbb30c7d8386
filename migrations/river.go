package migrations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River's job tables (river_job, river_leader, ...) live in tmend's schema, created and
// versioned by River's own migrator, beside tmend's tables. Up and Down run both.

func riverMigrator(pool *pgxpool.Pool, schema string) (*rivermigrate.Migrator[pgx.Tx], error) {
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		return nil, fmt.Errorf("set up River's migrations: %w", err)
	}
	return m, nil
}

// RiverLatest returns the highest River schema version this binary's River needs.
func RiverLatest() int {
	m, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return 0
	}
	all := m.AllVersions()
	return all[len(all)-1].Version
}

func riverUp(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	m, err := riverMigrator(pool, schema)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate River's tables: %w", err)
	}
	return nil
}

func riverDown(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if v, err := RiverVersion(ctx, pool, schema); err != nil || v == 0 {
		return err
	}
	m, err := riverMigrator(pool, schema)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1}); err != nil {
		return fmt.Errorf("remove River's tables: %w", err)
	}
	return nil
}

// RiverVersion returns the River schema version in schema; 0 when River's tables are not
// there. Like Version, it only reads.
func RiverVersion(ctx context.Context, pool *pgxpool.Pool, schema string) (int, error) {
	const tableSQL = `SELECT to_regclass(format('%I.river_migration', $1::text)) IS NOT NULL`
	var exists bool
	// Run once a process, as Version's: not prepared first.
	if err := pool.QueryRow(ctx, tableSQL, pgx.QueryExecModeExec, schema).Scan(&exists); err != nil {
		return 0, fmt.Errorf("look up River's migrations table in schema %q: %w", schema, err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	err := pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+pgx.Identifier{schema, "river_migration"}.Sanitize()+
		" WHERE line = 'main'", pgx.QueryExecModeExec).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read River's schema version in %q: %w", schema, err)
	}
	return v, nil
}
