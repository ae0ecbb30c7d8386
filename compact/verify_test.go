package compact

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
)

// TestVerifyRejects feeds verify outputs broken in each way it must catch.
func TestVerifyRejects(t *testing.T) {
	in := []byte(`[{"role":"user","content":"go"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"/a\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"` + strings.Repeat("x", 200) + `"},` +
		`{"role":"user","content":"next"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"/b\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c2","content":"y"},{"role":"assistant","content":"done"}]`)
	ol, err := repair.Inspect(in, repair.Options{})
	require.NoError(t, err)
	v, err := repair.Validate(in, repair.Options{})
	require.NoError(t, err)
	tr := &transcript{boundary: 3}
	small := bytes.Replace(in, []byte(strings.Repeat("x", 200)), []byte("x"), 1)
	require.Equal(t, "", verify(in, small, ol, tr, v))
	cases := map[string][]byte{
		"output_not_smaller": in,
		"pairs_changed":      bytes.Replace(small, []byte(`"c1"`), []byte(`"c9"`), 1),
		"suffix_changed":     bytes.Replace(small, []byte(`"y"`), []byte(`"z"`), 1),
		"new_issue":          bytes.Replace(small, []byte(`"tool_call_id":"c2"`), []byte(`"tool_call_id":"c3"`), 1),
	}
	for want, out := range cases {
		got := verify(in, out, ol, tr, v)
		require.True(t, strings.HasPrefix(got, want) || want == "new_issue" && got != "", "%s: got %q", want, got)
	}
}
