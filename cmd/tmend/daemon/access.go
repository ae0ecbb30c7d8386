package daemon

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// unmatched is the route label of requests no route of the API, the probes or the
// console took (answered 404 or 405).
const unmatched = "unmatched"

// Instrument counts and times each request h answers by the route pattern that took it
// (tmend_http_requests_total, tmend_http_request_duration_seconds), and logs it at debug
// level. h is a mux the Server is installed on; Serve instruments the handler it serves.
func (s *Server) Instrument(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		took := time.Since(start)
		if sw.code == 0 {
			sw.code = http.StatusOK // the handler wrote nothing
		}
		// The mux sets the pattern it matched on the request it was given.
		_, route, _ := strings.Cut(r.Pattern, " ")
		if route == "" || r.Pattern == "/" {
			route = unmatched
		}
		method := r.Method
		switch method {
		case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
			http.MethodOptions:
		default:
			method = "other" // a client's method names must not grow the series without bound
		}
		code := strconv.Itoa(sw.code)
		s.cfg.Metrics.requests.WithLabelValues(route, method, code).Inc()
		s.cfg.Metrics.latency.WithLabelValues(route, method, code).Observe(took.Seconds())
		s.httpLog.Debug().Str("method", r.Method).Str("route", route).Str("path", r.URL.Path).Int("status", sw.code).
			Int64("bytes", sw.bytes).Float64("duration_ms", float64(took.Microseconds())/1000).Msg("request")
	})
}

// statusWriter records the status and size of an answer. Unwrap lets
// http.ResponseController reach the connection's writer.
type statusWriter struct {
	http.ResponseWriter
	code  int
	bytes int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
