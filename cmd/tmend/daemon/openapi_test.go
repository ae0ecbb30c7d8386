package daemon_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/cmd/tmend/daemon"
	"github.com/tmend/tmend/store/model"
)

var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

// spec loads and validates openapi.yaml once, with a router over its operations.
func spec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		if specDoc, specErr = loader.LoadFromData(daemon.OpenAPI); specErr != nil {
			return
		}
		if specErr = specDoc.Validate(loader.Context); specErr != nil {
			return
		}
		specRouter, specErr = gorillamux.NewRouter(specDoc)
	})
	require.NoError(t, specErr)
	return specDoc, specRouter
}

// checkResponse holds an answer of the API or a probe to the document: its route, its
// status and its body must be there. The console's pages are not in it.
func checkResponse(t *testing.T, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	p := req.URL.Path
	if !strings.HasPrefix(p, "/v1/") && !slices.Contains([]string{"/healthz", "/readyz", "/metrics"}, p) {
		return
	}
	_, router := spec(t)
	// The document's router matches on the server's URL; the test server's host is not it.
	r := req.Clone(context.Background())
	r.URL.Scheme, r.URL.Host, r.Host = "", "", ""
	route, params, err := router.FindRoute(r)
	require.NoError(t, err, "%s %s is not in openapi.yaml", req.Method, p)
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	require.NoError(t, err, "%s %s answered %d, not as openapi.yaml says: %s", req.Method, p, resp.StatusCode, body)
}

// TestOpenAPIDocumentsEveryRoute: every route the daemon installs (besides the console's)
// is an operation of openapi.yaml, and every operation there is a route.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	doc, _ := spec(t)
	srv, err := daemon.New(daemon.Config{Metrics: daemon.NewMetrics()})
	require.NoError(t, err)
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	installed := srv.Routes()
	slices.Sort(installed)
	slices.Sort(documented)
	require.Equal(t, installed, documented)
}

// TestOpenAPIEnumsAreTheModels: the statuses the document lists are the model's lists.
func TestOpenAPIEnumsAreTheModels(t *testing.T) {
	t.Parallel()
	doc, _ := spec(t)
	enum := func(name string) []any { return doc.Components.Schemas[name].Value.Enum }
	strs := func(list ...string) []any {
		out := make([]any, len(list))
		for i, s := range list {
			out[i] = s
		}
		return out
	}
	var sessions, runs []string
	for _, s := range model.SessionStatuses() {
		sessions = append(sessions, string(s))
	}
	for _, s := range model.RunStatuses() {
		runs = append(runs, string(s))
	}
	require.ElementsMatch(t, strs(sessions...), enum("SessionStatus"))
	require.ElementsMatch(t, strs(runs...), enum("RunStatus"))
	require.ElementsMatch(t, strs(string(model.RollbackRestored), string(model.RollbackWouldRestore), string(model.RollbackRefused),
		string(model.RollbackFailed)), enum("RollbackStatus"))
}

// TestOpenAPIIsServed: the document is served as embedded, without a token.
func TestOpenAPIIsServed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	code, body := call(t, "GET", b.base+"/v1/openapi.yaml", "", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, string(daemon.OpenAPI), body)
}

// TestOpenAPIVersionContentIsJSON: since the document's version 2, a version's content
// is the transcript's JSON (any type), not a string holding it; checkResponse holds the
// answers to it.
func TestOpenAPIVersionContentIsJSON(t *testing.T) {
	t.Parallel()
	doc, _ := spec(t)
	require.Equal(t, "2", doc.Info.Version)
	content := doc.Components.Schemas["Version"].Value.Properties["content"].Value
	require.Empty(t, content.Type.Slice(), "content takes any JSON, not only a string")
}
