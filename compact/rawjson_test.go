package compact

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStrMatchesEncodingJSON: the fast paths decode as encoding/json does.
func TestStrMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "a\nb\tc\r\"q\" \\ / \b\f", "é 🚀 \u2028", "<tag> & \x01", `\n literal`} {
		for _, enc := range [][]byte{mustMarshal(s), []byte(`"` + `\/` + `"`)} {
			var want string
			require.NoError(t, json.Unmarshal(enc, &want))
			got, ok := str(enc)
			require.True(t, ok, "%s", enc)
			require.Equal(t, want, got, "%s", enc)
		}
	}
	ms, ok := members([]byte(` { "a" : "x\"}" , "b":[1,{"c":"]"}], "d" :null}`))
	require.True(t, ok)
	require.Len(t, ms, 3)
	require.Equal(t, "b", ms[1].key)
	_, ok = members([]byte(`{"a":1,}`))
	require.False(t, ok)
}

func mustMarshal(s string) []byte { b, _ := json.Marshal(s); return b }
