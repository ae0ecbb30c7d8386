package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/tmend/tmend/migrations"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
)

// settings resolves an option by precedence: the flag when given, then TMEND_<NAME>
// from the environment, then the config file, then the flag's default.
type settings struct {
	e    *env
	fs   *pflag.FlagSet
	file map[string]string
}

const configHelp = `Every option can also come from the environment as TMEND_<OPTION> (TMEND_TABLE,
TMEND_QUIET_PERIOD, ...) or from a YAML config file (--config or TMEND_CONFIG) with keys
like table: or quiet_period:. A flag beats the environment, which beats the file.`

// dbFlags are the options of every command that opens the database.
func registerDBFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML file with options (keys are option names with _ for -)")
	fs.String("database-url", "", "Postgres URL (default: TMEND_DATABASE_URL, DATABASE_URL, the config file, then PG* variables)")
	fs.String("schema", store.DefaultSchema, "schema of tmend's own tables")
	fs.String("log-level", "info", "debug, info, warn or error")
}

// registerSourceFlags adds where the sessions are.
func registerSourceFlags(fs *pflag.FlagSet) {
	fs.String("table", store.DefaultSource.Table, "table holding the sessions (table or schema.table)")
	fs.String("id-column", store.DefaultSource.IDColumn, "its id column (text, uuid or integer)")
	fs.String("messages-column", store.DefaultSource.MessagesColumn, "its transcript column (jsonb, json or text)")
	fs.String("updated-at-column", store.DefaultSource.UpdatedAtColumn, "its last-change column (timestamptz; empty: every run is full)")
}

// registerScanFlags adds how runs go.
func registerScanFlags(fs *pflag.FlagSet, rf *repairFlags) {
	rf.register(fs)
	fs.Int("workers", 0, "sessions repaired and written at once (default: twice the number of CPUs)")
	fs.Int("batch-size", 500, "sessions read per page")
	fs.Int("max-bytes", 64<<20, "larger sessions are reported too_large and left alone")
	fs.Int("max-inflight-bytes", scanner.DefaultMaxInflightBytes, "content read and not yet repaired, across pages and workers (a larger session goes alone); memory use is a few times this")
	fs.Duration("overlap", 15*time.Minute, "incremental runs re-read this much before the last run (at least the quiet period)")
	fs.Duration("batch-pause", 0, "pause between pages, to go easy on a busy database")
}

func loadSettings(e *env, cmd *cobra.Command) (*settings, error) {
	s := &settings{e: e, fs: cmd.Flags(), file: map[string]string{}}
	path := s.flagOrEnv("config")
	if path == "" {
		return s, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("read config file: %v", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, usageErrorf("config file %s: %v", path, err)
	}
	for k, v := range raw {
		name := strings.ReplaceAll(k, "_", "-")
		if s.fs.Lookup(name) == nil && !knownSetting(name) {
			return nil, usageErrorf("config file %s: unknown option %q", path, k)
		}
		switch v.(type) {
		case map[string]any, []any:
			return nil, usageErrorf("config file %s: option %q must be a single value", path, k)
		}
		s.file[name] = fmt.Sprint(v)
	}
	return s, nil
}

// knownSetting accepts options of other commands in a shared config file.
func knownSetting(name string) bool {
	switch name {
	case "database-url", "schema", "log-level", "table", "id-column", "messages-column", "updated-at-column",
		"dialect", "target", "failed-turns", "quiet-period", "workers", "batch-size", "max-bytes", "max-inflight-bytes", "overlap",
		"batch-pause", "schedule", "time-zone", "listen", "api-token", "read-token", "shutdown-timeout",
		"prune-schedule", "prune-older-than":
		return true
	}
	return false
}

func envName(flag string) string {
	return "TMEND_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func (s *settings) flagOrEnv(name string) string {
	if f := s.fs.Lookup(name); f != nil && f.Changed {
		return f.Value.String()
	}
	return s.e.getenv(envName(name))
}

// get resolves a string option.
func (s *settings) get(name string) string {
	if f := s.fs.Lookup(name); f != nil && f.Changed {
		return f.Value.String()
	}
	if v, ok := s.lookupEnv(name); ok {
		return v
	}
	if v, ok := s.file[name]; ok {
		return v
	}
	if f := s.fs.Lookup(name); f != nil {
		return f.DefValue
	}
	return ""
}

func (s *settings) lookupEnv(name string) (string, bool) {
	v := s.e.getenv(envName(name))
	if name == "database-url" && v == "" {
		v = s.e.getenv("DATABASE_URL")
	}
	return v, v != ""
}

func (s *settings) int(name string) (int, error) {
	v, err := strconv.Atoi(s.get(name))
	if err != nil {
		return 0, usageErrorf("--%s must be a whole number, got %q", name, s.get(name))
	}
	return v, nil
}

func (s *settings) duration(name string) (time.Duration, error) {
	v, err := time.ParseDuration(s.get(name))
	if err != nil {
		return 0, usageErrorf("--%s must be a duration like 10m or 1h30m, got %q", name, s.get(name))
	}
	return v, nil
}

func (s *settings) source() store.Source {
	return store.Source{Table: s.get("table"), IDColumn: s.get("id-column"),
		MessagesColumn: s.get("messages-column"), UpdatedAtColumn: s.get("updated-at-column")}
}

// logger writes zerolog JSON to stderr, or readable lines when stderr is a terminal.
func (s *settings) logger() (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(s.get("log-level"))
	if err != nil || level == zerolog.NoLevel {
		return zerolog.Nop(), usageErrorf("--log-level must be debug, info, warn or error, got %q", s.get("log-level"))
	}
	w := s.e.stderr
	if isTerminal(s.e.stderr) {
		w = zerolog.ConsoleWriter{Out: s.e.stderr, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}

func isTerminal(w io.Writer) bool {
	if o, ok := w.(*outputStream); ok {
		w = o.w
	}
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// openDB connects, checks that the schema matches this binary, and logs the effective
// settings once (password redacted).
func (s *settings) openDB(ctx context.Context, log zerolog.Logger) (*pgxpool.Pool, string, error) {
	url, schema := s.get("database-url"), s.get("schema")
	cfg, err := store.ParseConfig(url, schema)
	if err != nil {
		return nil, "", &exitError{code: exitUsage, err: err}
	}
	log.Info().Str("database", store.Describe(cfg)).Str("schema", schema).Msg("connecting")
	pool, err := store.Connect(ctx, url, schema)
	if err != nil {
		return nil, "", err
	}
	if err := migrations.Check(ctx, pool, schema); err != nil {
		pool.Close()
		return nil, "", err
	}
	return pool, schema, nil
}

// scannerConfig builds the scanner's configuration from the settings.
func (s *settings) scannerConfig(rf *repairFlags, src store.Source) (scanner.Config, error) {
	// repairFlags were bound to flags; fill them from env and file where no flag was given.
	rf.dialect, rf.target, rf.failedTurns = s.get("dialect"), s.get("target"), s.get("failed-turns")
	var err error
	if rf.quietPeriod, err = s.duration("quiet-period"); err != nil {
		return scanner.Config{}, err
	}
	ropts, err := rf.options()
	if err != nil {
		return scanner.Config{}, err
	}
	cfg := scanner.Config{Source: src.Name(), Repair: ropts}
	if cfg.Workers, err = s.int("workers"); err != nil {
		return cfg, err
	}
	if cfg.Workers < 1 {
		cfg.Workers = 2 * runtime.GOMAXPROCS(0)
	}
	if cfg.BatchSize, err = s.int("batch-size"); err != nil {
		return cfg, err
	}
	if cfg.MaxBytes, err = s.int("max-bytes"); err != nil {
		return cfg, err
	}
	if cfg.MaxInflightBytes, err = s.int("max-inflight-bytes"); err != nil {
		return cfg, err
	}
	if cfg.MaxInflightBytes < 1 {
		return cfg, usageErrorf("--max-inflight-bytes must be positive, got %d", cfg.MaxInflightBytes)
	}
	if cfg.Overlap, err = s.duration("overlap"); err != nil {
		return cfg, err
	}
	if cfg.BatchPause, err = s.duration("batch-pause"); err != nil {
		return cfg, err
	}
	return cfg, nil
}
