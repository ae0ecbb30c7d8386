package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// role is what a credential allows.
type role string

const (
	roleRead  role = "read"
	roleWrite role = "write"
)

// identity is who made a request: a role and the sign-in it came from.
type identity struct {
	role role
	// nonce names the sign-in; CSRF tokens are bound to it. "" for a bearer token.
	nonce string
}

func (id identity) Role() string { return string(id.role) }

// cookieName is the sign-in cookie.
const cookieName = "tmend_console"

// key is the HMAC key of sign-ins with role r, derived from that role's token: changing
// a token ends its sign-ins, and every replica with the same tokens accepts the same
// cookies. nil when the role has no token.
func (c *Console) key(r role) []byte {
	tok := c.cfg.ReadToken
	if r == roleWrite {
		tok = c.cfg.WriteToken
	}
	if tok == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(tok))
	m.Write([]byte("tmend console sign-in v1"))
	return m.Sum(nil)
}

func mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "|")))
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// signIn is the cookie value of a new sign-in: role, expiry and a random nonce, with
// their MAC. The token itself is never in it.
func (c *Console) signIn(r role, until time.Time) string {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // never fails (crypto/rand)
	payload := strings.Join([]string{string(r), strconv.FormatInt(until.Unix(), 10), b64.EncodeToString(nonce)}, "|")
	return b64.EncodeToString([]byte(payload)) + "." + b64.EncodeToString(mac(c.key(r), payload))
}

// checkSignIn returns the identity of a cookie value that this console signed and that
// has not expired.
func (c *Console) checkSignIn(value string, now time.Time) (identity, bool) {
	p, m, ok := strings.Cut(value, ".")
	if !ok {
		return identity{}, false
	}
	payload, err1 := b64.DecodeString(p)
	sum, err2 := b64.DecodeString(m)
	if err1 != nil || err2 != nil {
		return identity{}, false
	}
	fields := strings.Split(string(payload), "|")
	if len(fields) != 3 || fields[0] != string(roleRead) && fields[0] != string(roleWrite) {
		return identity{}, false
	}
	r := role(fields[0])
	key := c.key(r)
	if key == nil || !hmac.Equal(sum, mac(key, string(payload))) {
		return identity{}, false
	}
	until, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || now.Unix() >= until {
		return identity{}, false
	}
	return identity{role: r, nonce: fields[2]}, true
}

// tokenRole is the role a token gives, if any; compared in constant time.
func (c *Console) tokenRole(tok string) (role, bool) {
	is := func(want string) bool {
		return want != "" && tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1
	}
	switch {
	case is(c.cfg.WriteToken):
		return roleWrite, true
	case is(c.cfg.ReadToken):
		return roleRead, true
	}
	return "", false
}

// identify returns who made the request: a bearer token (the scheme case-insensitive),
// else the sign-in cookie.
func (c *Console) identify(r *http.Request) (identity, bool) {
	if scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " "); ok && strings.EqualFold(scheme, "Bearer") {
		ro, ok := c.tokenRole(strings.TrimSpace(tok))
		return identity{role: ro}, ok
	}
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return identity{}, false
	}
	return c.checkSignIn(ck.Value, time.Now())
}

// csrfToken is the token forms carry for this sign-in; "" without one.
func (c *Console) csrfToken(id identity) string {
	if id.nonce == "" {
		return ""
	}
	return b64.EncodeToString(mac(c.key(id.role), "csrf", id.nonce))
}

// checkCSRF: a request signed in by cookie must carry its sign-in's CSRF token; one with
// a bearer token cannot be forged by another site and needs none.
func (c *Console) checkCSRF(r *http.Request, id identity) bool {
	if id.nonce == "" {
		return true
	}
	want := c.csrfToken(id)
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(want)) == 1
}

// reader requires a credential; a browser without one is sent to sign in.
func (c *Console) reader(next func(http.ResponseWriter, *http.Request, identity)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := c.identify(r)
		if !ok {
			c.unauthorized(w, r)
			return
		}
		if err := validQuery(r); err != nil {
			c.fail(w, r, id, http.StatusBadRequest, err)
			return
		}
		next(w, r, id)
	})
}

// writer requires the write token, a CSRF token from a browser, and a rollbacker.
func (c *Console) writer(next func(http.ResponseWriter, *http.Request, identity)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
		id, ok := c.identify(r)
		switch {
		case !ok:
			c.unauthorized(w, r)
		case id.role != roleWrite:
			c.fail(w, r, id, http.StatusForbidden, badInput("Rolling back needs the write token: sign out and sign in with it."))
		case !c.checkCSRF(r, id):
			c.fail(w, r, id, http.StatusForbidden, badInput("The form was not sent by this console, or your sign-in changed: go back, reload and try again."))
		case c.cfg.Rollback == nil:
			c.fail(w, r, id, http.StatusForbidden, badInput("This console cannot roll back."))
		case !validText(r.PostFormValue("id")) || validQuery(r) != nil:
			c.fail(w, r, id, http.StatusBadRequest, badInput("ids must be UTF-8 text without NUL characters"))
		default:
			next(w, r, id)
		}
	})
}

// unauthorized sends a browser's GET to the sign-in page and back afterwards; anything
// else gets a 401.
func (c *Console) unauthorized(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/console/api/") {
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="tmend"`)
	http.Error(w, "sign in, or send Authorization: Bearer with the read or write token", http.StatusUnauthorized)
}

// localPath is next when it is a path on this site, else "/": the sign-in page must not
// send anyone elsewhere.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, `\`) {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}

type loginBody struct {
	Next    string
	Failed  bool
	NoToken bool
	// RetryAfter is the seconds to wait when the client sent too many wrong tokens.
	RetryAfter int
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", c.view(identity{}, "Sign in",
		loginBody{Next: localPath(r.URL.Query().Get("next")), NoToken: c.cfg.WriteToken == "" && c.cfg.ReadToken == ""}))
}

// login checks the token and sets the sign-in cookie: HttpOnly, SameSite=Strict, and
// Secure over TLS. A client that sent too many wrong tokens gets a 429 whatever it sends.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	next := localPath(r.PostFormValue("next"))
	client := clientKey(r)
	if d := c.signIns.wait(client); d > 0 {
		secs := retryAfter(d)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		c.render(w, r, http.StatusTooManyRequests, "login", c.view(identity{}, "Sign in", loginBody{Next: next, RetryAfter: secs}))
		return
	}
	ro, ok := c.tokenRole(strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		c.signIns.wrongToken(client)
		c.render(w, r, http.StatusUnauthorized, "login", c.view(identity{}, "Sign in",
			loginBody{Next: next, Failed: true, NoToken: c.cfg.WriteToken == "" && c.cfg.ReadToken == ""}))
		return
	}
	until := time.Now().Add(c.cfg.SignInFor)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: c.signIn(ro, until), Path: "/", Expires: until,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if id, ok := c.identify(r); ok && !c.checkCSRF(r, id) {
		c.fail(w, r, id, http.StatusForbidden, badInput("The form was not sent by this console: go back, reload and try again."))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
