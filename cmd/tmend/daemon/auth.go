package daemon

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Access is what a credential allows.
type Access int

// The levels of access, each including the ones before it.
const (
	NoAccess    Access = iota
	ReadAccess         // audit rows and transcripts: the read token
	WriteAccess        // repairs, runs and rollbacks too: the API token
)

// TokenAccess returns what a token allows. An unset token (in Config) matches nothing,
// so without tokens everything is NoAccess.
func (s *Server) TokenAccess(token string) Access {
	switch {
	case tokenIs(token, s.cfg.APIToken):
		return WriteAccess
	case tokenIs(token, s.cfg.ReadToken):
		return ReadAccess
	}
	return NoAccess
}

// RequestAccess returns what the request's bearer token allows.
func (s *Server) RequestAccess(r *http.Request) Access { return s.TokenAccess(bearer(r)) }

// RequireRead serves next only to requests with the read token or the API token: what
// GETs return (audit rows, transcripts) is as private as the sessions themselves. It is
// 403 while neither token is configured, 401 without a valid one, and 400 for ids and
// query parameters Postgres cannot hold.
func (s *Server) RequireRead(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.APIToken == "" && s.cfg.ReadToken == "" {
			writeError(w, http.StatusForbidden, "no read token is configured; set --read-token or TMEND_READ_TOKEN to enable reads")
			return
		}
		if s.RequestAccess(r) < ReadAccess {
			unauthorized(w)
			return
		}
		if !validInput(w, r) {
			return
		}
		next(w, r)
	}
}

// RequireWrite serves next only to requests with the API token (403 while none is
// configured, 401 without it, 400 for bad input) and only while the server is not
// stopping (503); a stopping server waits for the writes it let in.
func (s *Server) RequireWrite(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.APIToken == "" {
			writeError(w, http.StatusForbidden, "no API token is configured; set --api-token or TMEND_API_TOKEN to enable writes")
			return
		}
		if s.RequestAccess(r) < WriteAccess {
			unauthorized(w)
			return
		}
		if !validInput(w, r) {
			return
		}
		if !s.begin() {
			writeError(w, http.StatusServiceUnavailable, "shutting down")
			return
		}
		defer s.runs.Done()
		next(w, r)
	}
}

// bearer returns the request's bearer token; the scheme is case-insensitive (RFC 9110).
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// tokenIs compares in constant time; an unset token matches nothing.
func tokenIs(got, want string) bool {
	return want != "" && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="tmend"`)
	writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
}

// validInput refuses ids and filters that Postgres cannot hold in a text value (a NUL,
// bytes that are not UTF-8) with a 400, before they reach a query.
func validInput(w http.ResponseWriter, r *http.Request) bool {
	bad := func(s string) bool { return !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 }
	if bad(r.PathValue("id")) {
		writeError(w, http.StatusBadRequest, "ids must be UTF-8 text without NUL characters")
		return false
	}
	for name, vs := range r.URL.Query() {
		for _, v := range vs {
			if bad(name) || bad(v) {
				writeError(w, http.StatusBadRequest, "query parameters must be UTF-8 text without NUL characters")
				return false
			}
		}
	}
	return true
}
