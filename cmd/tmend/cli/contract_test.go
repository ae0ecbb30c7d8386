package cli

import (
	"bufio"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/cmd/tmend/daemon"
)

var (
	apiDocOnce sync.Once
	apiDoc     *openapi3.T
	apiDocErr  error
)

// requireShape asserts that every line of out is the object the HTTP API documents as
// schema (in cmd/tmend/daemon/openapi.yaml): the CLI's --json and the API share shapes.
func requireShape(t *testing.T, schema, out string) {
	t.Helper()
	apiDocOnce.Do(func() {
		loader := openapi3.NewLoader()
		if apiDoc, apiDocErr = loader.LoadFromData(daemon.OpenAPI); apiDocErr == nil {
			apiDocErr = apiDoc.Validate(loader.Context)
		}
	})
	require.NoError(t, apiDocErr)
	ref, ok := apiDoc.Components.Schemas[schema]
	require.True(t, ok, "no schema %q in openapi.yaml", schema)
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<26)
	lines := 0
	for sc.Scan() {
		var v any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), sc.Text())
		require.NoError(t, ref.Value.VisitJSON(v, openapi3.MultiErrors()), "not a %s: %s", schema, sc.Text())
		lines++
	}
	require.Positive(t, lines, "no output")
}
