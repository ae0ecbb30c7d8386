package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/tmend/tmend/migrations"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store"
)

// migrateOptions are the options of migrate up and migrate version.
type migrateOptions struct{ conn connOptions }

func (o *migrateOptions) load(s *settings, _ []string) error { o.conn.load(s); return nil }
func (o *migrateOptions) Validate() error                    { return o.conn.Validate() }

// migrateDownOptions are the options of migrate down.
type migrateDownOptions struct {
	conn  connOptions
	n     string // N as given
	steps int
	all   bool
}

func (o *migrateDownOptions) load(s *settings, args []string) error {
	o.conn.load(s)
	if len(args) == 1 {
		o.n = args[0]
		o.steps, _ = strconv.Atoi(o.n) // not a number: 0, which Validate refuses
	}
	return nil
}

func (o *migrateDownOptions) Validate() error {
	switch {
	case o.n != "" && o.all:
		return errors.New("give either N or --all, not both")
	case o.n != "" && o.steps < 1:
		return fmt.Errorf("N must be a positive number of migrations, got %q", o.n) //nolint:staticcheck // N is the argument as the usage line names it
	case o.n == "" && !o.all:
		return errors.New("say how many migrations to revert (N) or --all")
	}
	return o.conn.Validate()
}

// migrateForceOptions are the options of migrate force.
type migrateForceOptions struct {
	conn    connOptions
	version int
}

func (o *migrateForceOptions) load(s *settings, args []string) error {
	o.conn.load(s)
	if len(args) != 1 {
		return errors.New("force takes exactly one VERSION")
	}
	v, err := strconv.Atoi(args[0])
	if err != nil || v < -1 {
		return fmt.Errorf("VERSION must be a migration number, got %q", args[0])
	}
	// A version this binary has no migration for would lock it out ("upgrade tmend").
	if v > int(migrations.Latest()) {
		return fmt.Errorf("VERSION %d is past this binary's last migration, %d", v, migrations.Latest())
	}
	o.version = v
	return nil
}

func (o *migrateForceOptions) Validate() error { return o.conn.Validate() }

func newMigrateCmd(e *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or update tmend's tables (up, down, version, force)",
		Long: `Manage tmend's schema with the migrations embedded in this binary.

Run 'tmend migrate up' before starting a new version of tmend. A database left dirty by
a failed migration needs 'tmend migrate force VERSION' after you have fixed it by hand.`,
		Example: `  tmend migrate up
  tmend migrate version --database-url postgres://tmend@db:5432/app
  tmend migrate down 1
  tmend migrate force 1`,
	}
	registerConnFlags(cmd.PersistentFlags())
	var asJSON bool
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the schema's version afterwards as a JSON object")
	// Without a subcommand it shows its help; anything else is a usage error.
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
		}
		return nil
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }

	up := &migrateOptions{}
	ver := &migrateOptions{}
	down := &migrateDownOptions{}
	force := &migrateForceOptions{}
	downCmd := &cobra.Command{
		Use:   "down [N]",
		Short: "Revert the last N migrations (all with --all)",
		Example: `  tmend migrate down 1
  tmend migrate down --all`,
		Args: maxArgs(1),
		RunE: runE(e, down, func(ctx context.Context, e *Env, o *migrateDownOptions) error {
			return withPool(ctx, e, o.conn, asJSON, func(pool *pgxpool.Pool) error {
				if err := migrations.Down(ctx, pool, o.conn.schema, o.steps); err != nil {
					return fmt.Errorf("migrate down: %w", err)
				}
				return nil
			})
		}),
	}
	downCmd.Flags().BoolVar(&down.all, "all", false, "revert every migration, dropping tmend's tables and their data")
	cmd.AddCommand(
		&cobra.Command{
			Use:     "up",
			Short:   "Apply every pending migration",
			Example: "  tmend migrate up",
			Args:    noArgs,
			RunE: runE(e, up, func(ctx context.Context, e *Env, o *migrateOptions) error {
				return withPool(ctx, e, o.conn, asJSON, func(pool *pgxpool.Pool) error {
					if err := migrations.Up(ctx, pool, o.conn.schema); err != nil {
						return fmt.Errorf("migrate up: %w", err)
					}
					return nil
				})
			}),
		},
		downCmd,
		&cobra.Command{
			Use:     "version",
			Short:   "Print the schema's migration version",
			Example: "  tmend migrate version",
			Args:    noArgs,
			RunE: runE(e, ver, func(ctx context.Context, e *Env, o *migrateOptions) error {
				return withPool(ctx, e, o.conn, asJSON, func(*pgxpool.Pool) error { return nil })
			}),
		},
		&cobra.Command{
			Use:   "force VERSION",
			Short: "Record VERSION as applied and clear the dirty flag, running nothing",
			Long: `Record VERSION as the schema's version and clear the dirty flag without running any
migration. Use it only after repairing by hand a schema that a failed migration left
dirty.`,
			Example: "  tmend migrate force 1",
			RunE: runE(e, force, func(ctx context.Context, e *Env, o *migrateForceOptions) error {
				return withPool(ctx, e, o.conn, asJSON, func(pool *pgxpool.Pool) error {
					if err := migrations.Force(ctx, pool, o.conn.schema, o.version); err != nil {
						return fmt.Errorf("migrate force: %w", err)
					}
					return nil
				})
			}),
		},
	)
	return cmd
}

// withPool connects (without checking the schema's version, which migrate changes), runs
// fn and prints the schema's version after it.
func withPool(ctx context.Context, e *Env, o connOptions, asJSON bool, fn func(*pgxpool.Pool) error) error {
	pool, err := store.Connect(ctx, o.databaseURL, o.schema)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := fn(pool); err != nil {
		return err
	}
	return printVersion(ctx, e, pool, o.schema, asJSON)
}

// schemaVersion is what migrate prints after it: tmend's and River's schema versions,
// and those this binary brings them to.
type schemaVersion struct {
	Schema       string `json:"schema"`
	Version      uint   `json:"version"`
	Dirty        bool   `json:"dirty"`
	Latest       uint   `json:"latest"`
	RiverVersion int    `json:"river_version"`
	RiverLatest  int    `json:"river_latest"`
}

func printVersion(ctx context.Context, e *Env, pool *pgxpool.Pool, schema string, asJSON bool) error {
	v, dirty, err := migrations.Version(ctx, pool, schema)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	rv, err := migrations.RiverVersion(ctx, pool, schema)
	if err != nil {
		return err
	}
	sv := schemaVersion{Schema: schema, Version: v, Dirty: dirty, Latest: migrations.Latest(), RiverVersion: rv,
		RiverLatest: migrations.RiverLatest()}
	if asJSON {
		return report.JSONLines(e.Stdout, []schemaVersion{sv})
	}
	state := "clean"
	if dirty {
		state = "dirty"
	}
	e.printf("schema %s at version %d (%s; this binary knows up to %d)\n",
		pgx.Identifier{schema}.Sanitize(), sv.Version, state, sv.Latest)
	e.printf("River's tables at version %d (this binary needs %d)\n", sv.RiverVersion, sv.RiverLatest)
	switch {
	case dirty:
		e.printf("a migration failed halfway: fix the schema by hand, then run `tmend migrate force VERSION` with the version it is at\n")
	case sv.Version > sv.Latest || sv.RiverVersion > sv.RiverLatest:
		e.printf("the schema is newer than this binary: upgrade tmend\n")
	case sv.Version < sv.Latest || sv.RiverVersion < sv.RiverLatest:
		e.printf("the schema is behind this binary: run `tmend migrate up`\n")
	}
	return nil
}
