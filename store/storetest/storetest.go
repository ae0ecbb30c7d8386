// Package storetest gives each test its own real Postgres database, cloned from a
// template that is migrated once per migration set, and the fixtures tests share.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tmend/tmend/migrations"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

// EnvURL names the variable holding the server tests create their databases on.
const EnvURL = "TMEND_TEST_DATABASE_URL"

const setupHint = EnvURL + " is not set: run `make test`, which starts a throwaway PostgreSQL " +
	"itself, or set it to a server where this user may CREATE DATABASE"

const connectHint = "is the server in " + EnvURL + " running? Unset the variable to let `make test` " +
	"start a throwaway PostgreSQL itself"

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// NewDB returns a pool on a fresh, fully migrated database of its own. The database is
// dropped when the test passes and kept (and named in the log) when it fails.
func NewDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := store.Connect(t.Context(), NewDBURL(t), store.DefaultSchema)
	if err != nil {
		t.Fatalf("connect to test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewDBURL creates a fresh migrated database like NewDB and returns its URL, for tests
// that start tmend itself.
func NewDBURL(t testing.TB) string {
	t.Helper()
	adminURL := os.Getenv(EnvURL)
	if adminURL == "" {
		t.Fatal(setupHint)
	}
	ctx := context.Background()
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(ctx, adminURL) })
	if templateErr != nil {
		t.Fatalf("prepare template database: %v", templateErr)
	}

	name := "tmend_test_" + randomHex(6)
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("connect to %s: %v (%s)", EnvURL, err, connectHint)
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{templateName}.Sanitize())); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept test database %q for inspection", name)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("drop test database %q: %v", name, err)
			return
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %q: %v", name, err)
		}
	})
	return WithDatabase(adminURL, name)
}

// ensureTemplate creates and migrates the template database for the current migration
// set once per server; concurrent test binaries serialise on an advisory lock.
func ensureTemplate(ctx context.Context, adminURL string) (string, error) {
	name := "tmend_tpl_" + migrationsDigest()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w (%s)", EnvURL, err, connectHint)
	}
	defer func() { _ = conn.Close(ctx) }()
	const lockID = 0x746d656e64 // "tmend"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockID); err != nil {
		return "", err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockID) //nolint:errcheck

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	// Build under a temporary name and rename when done, so a half-migrated template from
	// an interrupted run is never used.
	building := name + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return "", err
	}
	pool, err := store.Connect(ctx, WithDatabase(adminURL, building), store.DefaultSchema)
	if err != nil {
		return "", err
	}
	err = migrations.Up(ctx, pool, store.DefaultSchema)
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s",
		pgx.Identifier{building}.Sanitize(), pgx.Identifier{name}.Sanitize())); err != nil {
		return "", err
	}
	return name, nil
}

// migrationsDigest names the template after the migration files' content, so a changed
// migration set gets a template of its own.
func migrationsDigest() string {
	h := sha256.New()
	_ = fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// WithDatabase returns dsn (URL or keyword/value form) pointing at database name.
func WithDatabase(dsn, name string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		q := u.Query()
		q.Del("dbname")
		u.RawQuery = q.Encode()
		return u.String()
	}
	var out []string
	for _, f := range strings.Fields(dsn) {
		if !strings.HasPrefix(f, "dbname=") {
			out = append(out, f)
		}
	}
	return strings.Join(append(out, "dbname="+name), " ")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Sessions inserts sessions into tmend's own sessions table.
func Sessions(t testing.TB, pool *pgxpool.Pool, sessions ...model.Session) {
	t.Helper()
	if _, err := store.Import(t.Context(), pool, sessions); err != nil {
		t.Fatalf("insert sessions: %v", err)
	}
}

// Generated inserts cfg's generated sessions into tmend's own sessions table and returns
// them.
func Generated(t testing.TB, pool *pgxpool.Pool, cfg gen.Config) []model.Session {
	t.Helper()
	var sessions []model.Session
	err := gen.Generate(cfg, func(s gen.Session) error {
		msgs, err := json.Marshal(s.Messages)
		sessions = append(sessions, model.Session{ID: s.ID, Messages: msgs, UpdatedAt: s.UpdatedAt})
		return err
	})
	if err != nil {
		t.Fatalf("generate sessions: %v", err)
	}
	Sessions(t, pool, sessions...)
	return sessions
}

// Content returns a session's stored messages as text.
func Content(t testing.TB, pool *pgxpool.Pool, id string) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(t.Context(), "SELECT messages::text FROM sessions WHERE id = $1", id).Scan(&s); err != nil {
		t.Fatalf("read session %q: %v", id, err)
	}
	return s
}

// AllClean fails t unless every stored session validates with no issues.
func AllClean(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	rows, err := pool.Query(t.Context(), "SELECT id, messages::text FROM sessions")
	if err != nil {
		t.Fatalf("read sessions: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, msgs string
		if err := rows.Scan(&id, &msgs); err != nil {
			t.Fatalf("read sessions: %v", err)
		}
		v, err := repair.Validate([]byte(msgs), repair.Options{})
		if err != nil || len(v.Issues) > 0 {
			t.Fatalf("session %q is not clean: %v %v", id, err, v.Issues)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read sessions: %v", err)
	}
}
