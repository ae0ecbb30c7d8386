package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Names are read as Postgres spells them; an unquoted part is taken as written, as
// tmend always has.
func TestSplitIdentifier(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		`"Message_v2"`:          {"Message_v2"},
		`Message_v2`:            {"Message_v2"},
		`public."Message_v2"`:   {"public", "Message_v2"},
		`"my.schema"."a""b"`:    {"my.schema", `a"b`},
		`public.langchain_chat`: {"public", "langchain_chat"},
		`convs"; DROP x; --`:    {`convs"; DROP x; --`},
	} {
		got, err := splitIdentifier(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{`"open`, `a..b`, `"a"b`, `.a`, `a.`, `""`} {
		_, err := splitIdentifier(bad)
		require.Error(t, err, bad)
	}
	m, err := ParseMessageMap(`id=id,role=role,content=content:json,at="createdAt"`)
	require.NoError(t, err)
	require.Equal(t, []MapField{{Key: "id", Column: "id"}, {Key: "role", Column: "role"},
		{Key: "content", Column: "content", JSON: true}, {Key: "at", Column: `"createdAt"`}}, m)
	for _, bad := range []string{``, `id`, `i d=id`, `id=id,id=x`, `=id`, `id=`} {
		_, err := ParseMessageMap(bad)
		require.Error(t, err, bad)
	}
}
