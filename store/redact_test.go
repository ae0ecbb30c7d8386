package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store"
)

// leakyDSNs hold passwords made of SECRET, cut and escaped in ways that break parsers.
var leakyDSNs = []string{
	"postgres://u:Pa%zzSECRET@h/db",
	"postgres://u:pa ss SECRET@h/db",
	"postgres://u:SECRET@[::1/db",
	"postgres://u:SECRET@[::1]:notaport/db",
	"postgres://u:SEC@RET@h:x/db",
	"postgres://u:SEC/RET@h/db?x=%zz",
	"postgres://u:SEC?RET@h:x/db",
	"postgresql://u@h/db?password=SECRET&x=%zz",
	"postgres://u@h/db?pass%77ord=SECRET&port=x",
	"postgres://u@h/db?sslpassword=SECRET&connect_timeout=x",
	"host=h user=u password='se cret SECRET' bad",
	`host=h user=u password='se\' SECRET' port=x`,
	`host=h user=u password = SECRET port=x`,
	`host=h user=u password=SE\ CRET port=x`,
	`host=h user=u password='SECRET port=x`,
	`host=h user=u PASSWORD=SECRET port=x`,
}

func requireNoSecret(t *testing.T, s string) {
	t.Helper()
	for _, frag := range []string{"SEC", "CRET", "RET@", "se cret"} {
		require.NotContains(t, s, frag)
	}
}

func TestRedactWithoutParsing(t *testing.T) {
	t.Parallel()
	for _, dsn := range leakyDSNs {
		requireNoSecret(t, store.Redact(dsn))
	}
	for dsn, want := range map[string]string{
		"postgres://u:pw@db:5432/app?sslmode=require":        "postgres://u:xxxxx@db:5432/app?sslmode=require",
		"postgres://db/app?application_name=a&password=pw#x": "postgres://db/app?application_name=a&password=xxxxx#x",
		"postgres://u@db/app":                                "postgres://u@db/app",
		"host=db user=u password='a b\\'c' dbname=app":       "host=db user=u password=xxxxx dbname=app",
		"host=db  password = pw   dbname=app":                "host=db  password = xxxxx   dbname=app",
		"":                                                   "",
	} {
		require.Equal(t, want, store.Redact(dsn), dsn)
	}
}

func TestParseAndConnectErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range leakyDSNs {
		_, err := store.ParseConfig(dsn, "")
		if err != nil {
			requireNoSecret(t, err.Error())
			require.Contains(t, err.Error(), "parse database url")
			continue
		}
		// It parsed after all: the connect error must not carry it either.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = store.Connect(ctx, dsn, "")
		cancel()
		require.Error(t, err, dsn)
		requireNoSecret(t, err.Error())
	}
	_, err := store.Connect(context.Background(), "postgres://u:SECRET@127.0.0.1:1/db?connect_timeout=2", "")
	require.Error(t, err)
	requireNoSecret(t, err.Error())
	require.True(t, strings.HasPrefix(err.Error(), "connect to database"), err.Error())
}

func TestSimpleProtocolIsRefused(t *testing.T) {
	_, err := store.ParseConfig("postgres://u:secret@db/x?default_query_exec_mode=simple_protocol", "")
	require.ErrorContains(t, err, "simple_protocol is not supported")
	require.NotContains(t, err.Error(), "secret")
	_, err = store.ParseConfig("postgres://u@db/x?default_query_exec_mode=cache_statement", "")
	require.NoError(t, err)
}
