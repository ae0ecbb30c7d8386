package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/tmend/tmend/migrations"
	"github.com/tmend/tmend/store"
)

func newMigrateCmd(e *env) *cobra.Command {
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
	registerDBFlags(cmd.PersistentFlags())

	var schema string
	withPool := func(fn func(ctx context.Context, pool *pgxpool.Pool) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			s, err := loadSettings(e, cmd)
			if err != nil {
				return err
			}
			url := s.get("database-url")
			schema = s.get("schema")
			if _, err := store.ParseConfig(url, schema); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			pool, err := store.Connect(cmd.Context(), url, schema)
			if err != nil {
				return err
			}
			defer pool.Close()
			return fn(cmd.Context(), pool)
		}
	}

	up := &cobra.Command{
		Use:     "up",
		Short:   "Apply every pending migration",
		Example: "  tmend migrate up",
		Args:    noArgs,
		RunE: withPool(func(ctx context.Context, pool *pgxpool.Pool) error {
			if err := migrations.Up(ctx, pool, schema); err != nil {
				return fmt.Errorf("migrate up: %w", err)
			}
			return printVersion(ctx, e, pool, schema)
		}),
	}

	var downSteps int
	down := &cobra.Command{
		Use:   "down [N]",
		Short: "Revert the last N migrations (all with --all)",
		Example: `  tmend migrate down 1
  tmend migrate down --all`,
		Args: cobra.MaximumNArgs(1),
	}
	all := down.Flags().Bool("all", false, "revert every migration, dropping tmend's tables and their data")
	down.PreRunE = func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == 1 && *all:
			return usageErrorf("give either N or --all, not both")
		case len(args) == 1:
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return usageErrorf("N must be a positive number of migrations, got %q", args[0])
			}
			downSteps = n
		case !*all:
			return usageErrorf("say how many migrations to revert (N) or --all")
		}
		return nil
	}
	down.RunE = withPool(func(ctx context.Context, pool *pgxpool.Pool) error {
		if err := migrations.Down(ctx, pool, schema, downSteps); err != nil {
			return fmt.Errorf("migrate down: %w", err)
		}
		return printVersion(ctx, e, pool, schema)
	})

	ver := &cobra.Command{
		Use:     "version",
		Short:   "Print the schema's migration version",
		Example: "  tmend migrate version",
		Args:    noArgs,
		RunE: withPool(func(ctx context.Context, pool *pgxpool.Pool) error {
			return printVersion(ctx, e, pool, schema)
		}),
	}

	var forceVersion int
	force := &cobra.Command{
		Use:   "force VERSION",
		Short: "Record VERSION as applied and clear the dirty flag, running nothing",
		Long: `Record VERSION as the schema's version and clear the dirty flag without running any
migration. Use it only after repairing by hand a schema that a failed migration left
dirty.`,
		Example: "  tmend migrate force 1",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("force takes exactly one VERSION")
			}
			v, err := strconv.Atoi(args[0])
			if err != nil || v < -1 {
				return usageErrorf("VERSION must be a migration number, got %q", args[0])
			}
			forceVersion = v
			return nil
		},
		RunE: withPool(func(ctx context.Context, pool *pgxpool.Pool) error {
			if err := migrations.Force(ctx, pool, schema, forceVersion); err != nil {
				return fmt.Errorf("migrate force: %w", err)
			}
			return printVersion(ctx, e, pool, schema)
		}),
	}

	cmd.AddCommand(up, down, ver, force)
	return cmd
}

func printVersion(ctx context.Context, e *env, pool *pgxpool.Pool, schema string) error {
	v, dirty, err := migrations.Version(ctx, pool, schema)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	state := "clean"
	if dirty {
		state = "dirty"
	}
	e.printf("schema %s at version %d (%s; this binary knows up to %d)\n",
		pgx.Identifier{schema}.Sanitize(), v, state, migrations.Latest())
	return nil
}
