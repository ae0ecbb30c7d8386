package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
	"github.com/tmend/tmend/store"
)

// settings resolves an option by precedence: the flag when given, then TMEND_<NAME>
// from the environment, then the config file, then the flag's default.
type settings struct {
	e    *Env
	fs   *pflag.FlagSet
	file map[string]string
}

const configHelp = `Every option can also come from the environment as TMEND_<OPTION> (TMEND_TABLE,
TMEND_QUIET_PERIOD, ...) or from a YAML config file (--config or TMEND_CONFIG) with keys
like table: or quiet_period:. A flag beats the environment, which beats the file.`

// registerConnFlags adds the options of every command that opens the database.
func registerConnFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML file with options (keys are option names with _ for -)")
	fs.String("database-url", "", "Postgres URL (default: TMEND_DATABASE_URL, DATABASE_URL, the config file, then PG* variables)")
	fs.String("schema", store.DefaultSchema, "schema of tmend's own tables")
}

// registerDBFlags adds the options of the commands that open the database and log.
func registerDBFlags(fs *pflag.FlagSet) {
	registerConnFlags(fs)
	fs.String("log-level", "info", "debug, info, warn or error")
}

// sourceOptions are the options that say which table holds the sessions.
var sourceOptions = []string{"preset", "table", "layout", "id-column", "messages-column", "session-column",
	"order-column", "message-column", "message-map", "updated-at-column"}

// registerSourceFlags adds where the sessions are and, for commands that write them, who
// hears of a write.
func registerSourceFlags(fs *pflag.FlagSet, writes bool) {
	fs.String("preset", "", "a platform's own table, all its options set: "+strings.Join(store.Presets(), ", ")+" (options given as well win)")
	fs.String("table", store.DefaultSource.Table, "table holding the sessions (table or schema.table)")
	fs.String("layout", string(store.LayoutSessions), "how the table keeps sessions: sessions (a row each, holding the messages array), messages (a row per message) "+
		"or langgraph (LangGraph's PostgresSaver tables; --table names its checkpoints table, default checkpoints; a session is a thread: its thread_id, "+
		`or ["thread_id","checkpoint_ns"] for a subgraph's namespace)`)
	fs.String("id-column", store.DefaultSource.IDColumn, "its id column (text, uuid or integer; layout sessions)")
	fs.String("messages-column", store.DefaultSource.MessagesColumn, "its transcript column (jsonb, json or text; layout sessions)")
	fs.String("session-column", "", "the session id of each row (layout messages)")
	fs.String("order-column", "", "what orders a session's rows: an integer (a SERIAL id) or a timestamp; the primary key breaks ties (layout messages)")
	fs.String("message-column", "", "one message, a JSON object (jsonb, json or text; layout messages)")
	fs.String("message-map", "", `or a message made of columns, key=column,...: id=id,role=role,parts=parts (key=column:json for a text column holding JSON; layout messages)`)
	fs.String("updated-at-column", store.DefaultSource.UpdatedAtColumn, "its last-change column (timestamptz, or timestamp read in the database's time zone; empty: every run is full; layout messages: none unless given)")
	if writes {
		fs.Bool("touch-updated-at", false, "also set the updated-at column to now() when a session is repaired or rolled back (needs UPDATE on it)")
		fs.String("notify-channel", "", "pg_notify this channel for every session repaired or rolled back, on commit (e.g. "+store.DefaultNotifyChannel+")")
	}
}

// loadSettings reads the config file (--config or TMEND_CONFIG) of a command that has
// the --config flag; the others (check, fix, gen, version) take no options from files.
func loadSettings(e *Env, cmd *cobra.Command) (*settings, error) {
	s := &settings{e: e, fs: cmd.Flags(), file: map[string]string{}}
	if s.fs.Lookup("config") == nil {
		return s, nil
	}
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
		"preset", "layout", "session-column", "order-column", "message-column", "message-map",
		"dialect", "target", "failed-turns", "quiet-period", "workers", "batch-size", "max-bytes", "max-inflight-bytes", "overlap",
		"batch-pause", "schedule", "time-zone", "listen", "api-token", "read-token", "shutdown-timeout",
		"prune-schedule", "prune-older-than", "partitions", "concurrency", "partition-slice", "rescue-after",
		"touch-updated-at", "notify-channel", "metrics-textfile":
		return true
	}
	return false
}

func EnvName(flag string) string {
	return "TMEND_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func (s *settings) flagOrEnv(name string) string {
	if f := s.fs.Lookup(name); f != nil && f.Changed {
		return f.Value.String()
	}
	return s.e.Getenv(EnvName(name))
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
	v := s.e.Getenv(EnvName(name))
	if name == "database-url" && v == "" {
		v = s.e.Getenv("DATABASE_URL")
	}
	return v, v != ""
}

func (s *settings) int(name string) (int, error) {
	v, err := strconv.Atoi(s.get(name))
	if err != nil {
		return 0, fmt.Errorf("--%s must be a whole number, got %q", name, s.get(name))
	}
	return v, nil
}

func (s *settings) duration(name string) (time.Duration, error) {
	v, err := parseDuration(s.get(name))
	if err != nil {
		return 0, fmt.Errorf("--%s: %w", name, err)
	}
	return v, nil
}

// parseDuration is time.ParseDuration with an error a user can act on (Go's says
// `time: missing unit in duration "30"`).
func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil {
		return d, nil
	}
	if _, nerr := strconv.ParseFloat(v, 64); nerr == nil {
		return 0, fmt.Errorf("%q needs a unit, e.g. %ss or %sm", v, v, v)
	}
	return 0, fmt.Errorf("%q is not a duration: give a number and a unit, e.g. 30s, 5m or 1h30m", v)
}

// durationValue is a duration flag that says what a bad value lacks (parseDuration).
type durationValue time.Duration

// durationFlag defines every duration flag (pflag's own would print Go's parse error).
func durationFlag(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationValue)(p), name, usage)
}

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}
func (d *durationValue) Type() string   { return "duration" }
func (d *durationValue) String() string { return time.Duration(*d).String() }

func (s *settings) bool(name string) (bool, error) {
	v, err := strconv.ParseBool(s.get(name))
	if err != nil {
		return false, fmt.Errorf("--%s must be true or false, got %q", name, s.get(name))
	}
	return v, nil
}

// isSet reports whether an option was given (flag, environment or config file) rather
// than left at its default.
func (s *settings) isSet(name string) bool {
	if f := s.fs.Lookup(name); f != nil && f.Changed {
		return true
	}
	if _, ok := s.lookupEnv(name); ok {
		return true
	}
	_, ok := s.file[name]
	return ok
}

func (s *settings) source() (store.Source, error) {
	src := store.Source{Table: s.get("table"), IDColumn: s.get("id-column"),
		MessagesColumn: s.get("messages-column"), UpdatedAtColumn: s.get("updated-at-column")}
	if s.fs.Lookup("layout") != nil {
		var err error
		if src, err = s.tableSource(); err != nil {
			return src, err
		}
	}
	if s.fs.Lookup("touch-updated-at") == nil {
		return src, nil // a command that writes no sessions
	}
	var err error
	src.TouchUpdatedAt, err = s.bool("touch-updated-at")
	src.NotifyChannel = s.get("notify-channel")
	return src, err
}

// tableSource is the table mapping: a preset's, with the options given as well over it,
// or the options alone.
func (s *settings) tableSource() (store.Source, error) {
	src := store.DefaultSource
	if name := s.get("preset"); name != "" {
		p, err := store.Preset(name)
		if err != nil {
			return src, usageErrorf("--preset %q: no such preset (want one of %s)", name, strings.Join(store.Presets(), ", "))
		}
		src = p
	}
	set := func(name string, field *string) {
		if s.isSet(name) {
			*field = s.get(name)
		}
	}
	layout := string(src.Layout)
	set("layout", &layout)
	src.Layout = store.Layout(layout)
	switch src.Layout {
	case "", store.LayoutSessions:
	case store.LayoutMessages:
		if s.get("preset") == "" {
			// The one-row-per-session defaults do not apply.
			src.IDColumn, src.MessagesColumn, src.UpdatedAtColumn = "", "", ""
		}
	case store.LayoutLangGraph:
		// The saver's own tables: the mapping options do not apply.
		src.IDColumn, src.MessagesColumn, src.UpdatedAtColumn = "", "", ""
		if !s.isSet("table") && s.get("preset") == "" {
			src.Table = "checkpoints"
		}
	default:
		return src, usageErrorf("--layout must be sessions, messages or langgraph, got %q", layout)
	}
	set("table", &src.Table)
	set("id-column", &src.IDColumn)
	set("messages-column", &src.MessagesColumn)
	set("session-column", &src.SessionColumn)
	set("order-column", &src.OrderColumn)
	if s.isSet("message-column") {
		src.MessageColumn, src.MessageMap = s.get("message-column"), nil
	}
	if s.isSet("message-map") {
		m, err := store.ParseMessageMap(s.get("message-map"))
		if err != nil {
			return src, usageErrorf("--message-map: %v", err)
		}
		src.MessageColumn, src.MessageMap = "", m
	}
	set("updated-at-column", &src.UpdatedAtColumn)
	if src.Layout == store.LayoutMessages && (src.SessionColumn == "" || src.OrderColumn == "" || src.MessageColumn == "" && src.MessageMap == nil) {
		return src, usageErrorf("--layout messages needs --session-column, --order-column and --message-column or --message-map (or a --preset)")
	}
	return src, nil
}

// newLogger writes zerolog JSON to stderr, or readable lines when stderr is a terminal.
func newLogger(e *Env, level zerolog.Level) zerolog.Logger {
	return loggerTo(e.Stderr, isTerminal(e.Stderr), level)
}

// loggerTo writes zerolog JSON to w, or readable lines when w is a terminal.
func loggerTo(w io.Writer, terminal bool, level zerolog.Level) zerolog.Logger {
	if terminal {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

func isTerminal(w io.Writer) bool {
	if o, ok := w.(*outputStream); ok {
		w = o.w
	}
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// connect opens the database, checks that its schema matches this binary, and logs where
// it connected (password redacted).
func connect(ctx context.Context, log zerolog.Logger, o connOptions) (*pgxpool.Pool, error) {
	cfg, err := store.ParseConfig(o.databaseURL, o.schema)
	if err != nil {
		return nil, err
	}
	c := cfg.ConnConfig
	log.WithLevel(o.connectLevel).Str("database", c.Database).Str("host", c.Host).Uint16("port", c.Port).
		Str("user", c.User).Str("schema", o.schema).Msg("connecting")
	pool, err := store.ConnectSized(ctx, o.databaseURL, o.schema, o.poolSize)
	if err != nil {
		return nil, err
	}
	if err := migrations.Check(ctx, pool, o.schema); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// openStore connects and opens the source; a source that is not usable (no such table,
// wrong column types, missing privileges) is a usage error.
func openStore(ctx context.Context, log zerolog.Logger, o dbOptions, readOnly bool) (*store.Store, func(), error) {
	pool, err := connect(ctx, log, o.connOptions)
	if err != nil {
		return nil, nil, err
	}
	st, err := store.Open(ctx, pool, o.source, readOnly)
	if err != nil {
		pool.Close()
		if errors.Is(err, store.ErrSource) {
			return nil, nil, &exitError{code: ExitUsage, err: err, setup: true}
		}
		return nil, nil, err
	}
	st.SetOrigin(origin())
	for _, a := range st.Advice() {
		log.Warn().Msg(a)
	}
	return st, pool.Close, nil
}
