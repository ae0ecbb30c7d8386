package cli

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
)

// options is one command's options struct. Flags bind to its fields; load fills in the
// rest from the arguments and the settings (flag, then TMEND_* environment, then config
// file); Validate checks the whole before the command opens a file or the database.
type options interface {
	load(s *settings, args []string) error
	Validate() error
}

// runE is every command's RunE: it loads the settings into o, validates it (an error in
// either is a usage error, exit 2) and calls the command's handler.
func runE[O options](e *Env, o O, handler func(ctx context.Context, e *Env, o O) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		s, err := loadSettings(e, cmd)
		if err != nil {
			return err
		}
		if err := o.load(s, args); err != nil {
			return usageError(err)
		}
		if err := o.Validate(); err != nil {
			return usageError(err)
		}
		return handler(cmd.Context(), e, o)
	}
}

func usageError(err error) error {
	if ee := (*exitError)(nil); errors.As(err, &ee) {
		return err
	}
	return &exitError{code: ExitUsage, err: err}
}

// connOptions say which database and schema a command connects to.
type connOptions struct {
	databaseURL string
	schema      string
	// configured is false when neither a URL nor a libpq variable names a database:
	// pgx would then try the local socket as the OS user, which is rarely meant.
	configured bool
	// poolSize, if larger than pgx's default, sizes the pool (see queueOptions).
	poolSize int
	// connectLevel is the level of the "connecting" line: debug for commands, info for
	// the daemon and workers, whose logs are read later.
	connectLevel zerolog.Level
}

// libpqLocators are the libpq variables that say where or as whom to connect; any of
// them set counts as a configured database (pgx reads them all).
var libpqLocators = []string{"PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"}

func (o *connOptions) load(s *settings) {
	o.databaseURL, o.schema = s.get("database-url"), s.get("schema")
	o.configured = o.databaseURL != ""
	for _, v := range libpqLocators {
		o.configured = o.configured || s.e.Getenv(v) != ""
	}
}

const noDatabaseHelp = "no database configured: give --database-url postgres://USER:PASSWORD@HOST:5432/DBNAME, " +
	"or set TMEND_DATABASE_URL (or DATABASE_URL) to such a URL, or database_url in a --config file, " +
	"or the libpq variables PGHOST, PGPORT, PGDATABASE, PGUSER and PGPASSWORD"

// Validate parses the URL; its error never shows the password.
func (o *connOptions) Validate() error {
	if !o.configured {
		return errors.New(noDatabaseHelp)
	}
	_, err := store.ParseConfig(o.databaseURL, o.schema)
	return err
}

// dbOptions are the options of every command that opens the database and logs: where
// the database and the sessions are, and the log level.
type dbOptions struct {
	connOptions
	source   store.Source
	logLevel zerolog.Level
}

func (o *dbOptions) load(s *settings) error {
	o.connOptions.load(s)
	var err error
	if o.source, err = s.source(); err != nil {
		return err
	}
	level, err := zerolog.ParseLevel(s.get("log-level"))
	if err != nil || level == zerolog.NoLevel {
		return fmt.Errorf("--log-level must be debug, info, warn or error, got %q", s.get("log-level"))
	}
	o.logLevel = level
	return nil
}

// engineOptions are the repair engine's options, shared by check, fix, repair, scan and
// serve, from the settings (check and fix have no config file).
type engineOptions struct {
	dialect     string
	target      string
	failedTurns string
	now         string
	quietPeriod time.Duration
	force       bool

	repair repair.Options // what load makes of the above
}

func (o *engineOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.dialect, "dialect", "", "force a dialect instead of detecting it: "+dialectNames())
	fs.StringVar(&o.target, "target", "", "rewrite call ids the provider rejects: anthropic, openai, openai-responses, gemini, bedrock, mistral")
	fs.StringVar(&o.failedTurns, "failed-turns", "keep", "calls of failed or aborted turns that have results: keep, or strip them too")
	durationFlag(fs, &o.quietPeriod, "quiet-period", repair.DefaultQuietPeriod, "calls of a session's last turn changed this recently may still be running and are left alone")
}

// registerForce adds --force, for commands that repair on demand (the daemon's scheduled
// runs never force).
func (o *engineOptions) registerForce(fs *pflag.FlagSet) {
	fs.BoolVar(&o.force, "force", false, "repair pending calls within the quiet period too")
}

func (o *engineOptions) registerNow(fs *pflag.FlagSet) {
	fs.StringVar(&o.now, "now", "", "the time the quiet period is measured to (RFC 3339; default: the current time)")
}

// loadSettings takes the options that may come from the environment or a config file
// too (all but --force and --now).
func (o *engineOptions) loadSettings(s *settings) error {
	o.dialect, o.target, o.failedTurns = s.get("dialect"), s.get("target"), s.get("failed-turns")
	var err error
	o.quietPeriod, err = s.duration("quiet-period")
	return err
}

// load parses the options into repair.Options.
func (o *engineOptions) load() error {
	r := &o.repair
	var err error
	if o.dialect != "" {
		if r.Dialect, err = repair.ParseDialect(o.dialect); err != nil {
			return fmt.Errorf("--dialect: %w", err)
		}
	}
	if o.target != "" {
		if r.Target, err = repair.ParseTarget(o.target); err != nil {
			return fmt.Errorf("--target: %w", err)
		}
	}
	switch repair.FailedTurnPolicy(o.failedTurns) {
	case repair.FailedTurnsKeep, repair.FailedTurnsStrip:
		r.FailedTurns = repair.FailedTurnPolicy(o.failedTurns)
	default:
		return fmt.Errorf("--failed-turns must be keep or strip, got %q", o.failedTurns)
	}
	r.Now = time.Now()
	if o.now != "" {
		if r.Now, err = time.Parse(time.RFC3339Nano, o.now); err != nil {
			return fmt.Errorf("--now must be an RFC 3339 time like 2026-11-21T03:00:00Z, got %q", o.now)
		}
	}
	r.QuietPeriod = o.quietPeriod
	if o.quietPeriod == 0 {
		r.QuietPeriod = -1 // zero on the command line means none
	}
	r.Force = o.force
	return nil
}

// runOptions are how the runs of scan, repair, serve and worker go: the engine's options
// and the scanner's configuration.
type runOptions struct {
	engine engineOptions
	config scanner.Config
	// repairs: the command repairs with options of its own (a worker's scans bring theirs).
	repairs bool
}

// runFlags are the groups of run options a command has; each lists only those that mean
// something for it.
type runFlags int

const (
	// repairFlags say how sessions are repaired: the engine's options and --max-bytes.
	// A worker has none: a run's partitions repair as the run was started.
	repairFlags runFlags = 1 << iota
	forceFlag
	// pageFlags say how pages of many sessions are read and written, and how far an
	// incremental run looks back; a single session (repair) has none.
	pageFlags
	// compactFlag compacts sessions after their repair (scan, repair).
	compactFlag
)

// compactFlagHelp is --compact's help, for scan and repair.
const compactFlagHelp = "after the repair, in the same write, compact each session with this profile: conservative, " +
	"standard (the default of a bare --compact) or aggressive (see 'tmend compact --help'); one row per session layouts only"

func (o *runOptions) register(fs *pflag.FlagSet, use runFlags) {
	if use&repairFlags != 0 {
		o.engine.register(fs)
		fs.Int("max-bytes", 64<<20, "larger sessions are reported too_large and left alone, and so are those whose repair would take over 16 MiB + 8 x this in memory")
	}
	if use&forceFlag != 0 {
		o.engine.registerForce(fs)
	}
	if use&compactFlag != 0 {
		fs.String("compact", "", compactFlagHelp)
		fs.Lookup("compact").NoOptDefVal = string(compact.Standard)
	}
	if use&pageFlags != 0 {
		fs.Int("workers", 0, "sessions repaired and written at once (default: twice the number of CPUs)")
		fs.Int("batch-size", 500, "sessions read per page")
		fs.Int("max-inflight-bytes", scanner.DefaultMaxInflightBytes, "content read and not yet repaired, across pages and workers (a larger session goes alone); memory use is a few times this")
		durationFlag(fs, new(time.Duration), "overlap", 15*time.Minute, "incremental runs re-read this much before the last run (at least the quiet period)")
		durationFlag(fs, new(time.Duration), "batch-pause", 0, "pause between pages, to go easy on a busy database")
	}
}

// load reads the options the command has; the scanner's defaults stand for the others.
func (o *runOptions) load(s *settings, src store.Source) error {
	c := &o.config
	c.Source = src.Name()
	if s.fs.Lookup("dialect") != nil {
		if err := o.engine.loadSettings(s); err != nil {
			return err
		}
		if err := o.engine.load(); err != nil {
			return err
		}
		c.Repair, o.repairs = o.engine.repair, true
	}
	var err error
	ints := []struct {
		name string
		dst  *int
		min  int // 0 workers is the default, twice the CPUs
	}{{"workers", &c.Workers, 0}, {"batch-size", &c.BatchSize, 1}, {"max-bytes", &c.MaxBytes, 1}, {"max-inflight-bytes", &c.MaxInflightBytes, 1}}
	for _, v := range ints {
		if s.fs.Lookup(v.name) == nil {
			continue
		}
		if *v.dst, err = s.int(v.name); err != nil {
			return err
		}
		if *v.dst < v.min {
			return fmt.Errorf("--%s must be at least %d, got %d", v.name, v.min, *v.dst)
		}
	}
	durations := []struct {
		name string
		dst  *time.Duration
	}{{"overlap", &c.Overlap}, {"batch-pause", &c.BatchPause}}
	for _, v := range durations {
		if s.fs.Lookup(v.name) == nil {
			continue
		}
		if *v.dst, err = s.duration(v.name); err != nil {
			return err
		}
	}
	if s.fs.Lookup("compact") != nil && s.get("compact") != "" {
		c.Compact = compact.Profile(s.get("compact"))
		if _, err := compact.ForProfile(c.Compact); err != nil {
			return usageErrorf("--compact: %v", err)
		}
		if src.Layout != "" && src.Layout != store.LayoutSessions {
			return usageErrorf("--compact with --layout %s: %v", src.Layout, store.ErrCompactLayout)
		}
	}
	if c.Workers == 0 {
		c.Workers = 2 * runtime.GOMAXPROCS(0)
	}
	if s.fs.Lookup("max-inflight-bytes") == nil {
		c.MaxInflightBytes = scanner.DefaultMaxInflightBytes
	}
	return nil
}

func (o *runOptions) Validate() error {
	if o.config.MaxInflightBytes < 1 {
		return fmt.Errorf("--max-inflight-bytes must be positive, got %d", o.config.MaxInflightBytes)
	}
	return nil
}
