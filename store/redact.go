package store

import (
	"errors"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

const mask = "xxxxx"

// Redact hides the passwords in a database URL or keyword/value DSN. It does not need
// the string to parse: a malformed one (a bad percent escape, spaces, an unclosed IPv6
// bracket, an unterminated quote) is redacted too, erring on the side of hiding more.
func Redact(dsn string) string {
	s, _ := redact(dsn)
	return s
}

// redact returns the redacted DSN and the password values it hid, as written and as
// they decode.
func redact(dsn string) (string, []string) {
	if i := strings.Index(dsn, "://"); i >= 0 {
		return redactURL(dsn, i+len("://"))
	}
	return redactKeywordValue(dsn)
}

// redactURL hides the userinfo password and password query parameters of a URL. The
// userinfo ends at the last '@' of the authority; as a password may hold a raw '/', '?'
// or '@' in a URL that does not parse, that is the last '@' before the query, or the
// last '@' at all when the query holds the only ones.
func redactURL(dsn string, start int) (string, []string) {
	var secrets []string
	rest := dsn[start:]
	var b strings.Builder
	b.WriteString(dsn[:start])
	at := -1
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		at = strings.LastIndexByte(rest[:q], '@')
	}
	if at < 0 {
		at = strings.LastIndexByte(rest, '@')
	}
	if at >= 0 {
		user, pw, ok := strings.Cut(rest[:at], ":")
		b.WriteString(user)
		if ok {
			b.WriteString(":" + mask)
			secrets = appendSecret(secrets, pw)
		}
		b.WriteByte('@')
		rest = rest[at+1:]
	}
	q := strings.IndexByte(rest, '?')
	if q < 0 {
		b.WriteString(rest)
		return b.String(), secrets
	}
	b.WriteString(rest[:q+1])
	query, fragment, hasFragment := strings.Cut(rest[q+1:], "#")
	for i, pair := range strings.Split(query, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		key, value, ok := strings.Cut(pair, "=")
		if decoded, err := url.QueryUnescape(key); err == nil {
			key = decoded
		}
		if ok && isPasswordKey(key) {
			b.WriteString(pair[:len(pair)-len(value)] + mask)
			secrets = appendSecret(secrets, value)
			continue
		}
		b.WriteString(pair)
	}
	if hasFragment {
		b.WriteString("#" + fragment)
	}
	return b.String(), secrets
}

// redactKeywordValue hides the values of password keywords in a libpq keyword/value
// string (host=db password='a b\'c'), with or without spaces around '=', quoted or not;
// an unterminated quote hides the rest of the string.
func redactKeywordValue(dsn string) (string, []string) {
	var secrets []string
	var b strings.Builder
	i := 0
	for i < len(dsn) {
		// A keyword, then optional spaces, '=', optional spaces and a value.
		k := i
		for k < len(dsn) && dsn[k] != '=' && !isSpace(dsn[k]) {
			k++
		}
		key := dsn[i:k]
		j := skipSpaces(dsn, k)
		if j >= len(dsn) || dsn[j] != '=' {
			b.WriteString(dsn[i:j])
			i = j
			continue
		}
		v := skipSpaces(dsn, j+1)
		end, value := scanValue(dsn, v)
		if isPasswordKey(key) {
			b.WriteString(dsn[i:v] + mask)
			secrets = appendSecret(secrets, dsn[v:end])
			secrets = appendSecret(secrets, value)
		} else {
			b.WriteString(dsn[i:end])
		}
		i = end
		for i < len(dsn) && isSpace(dsn[i]) {
			b.WriteByte(dsn[i])
			i++
		}
	}
	return b.String(), secrets
}

// scanValue reads a keyword/value value starting at i: quoted ('...' with \' and \\) or
// up to the next space (with backslash escapes). It returns where the value ends and
// its unescaped text.
func scanValue(s string, i int) (int, string) {
	var v strings.Builder
	if i < len(s) && s[i] == '\'' {
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				if j+1 < len(s) {
					j++
					v.WriteByte(s[j])
				}
			case '\'':
				return j + 1, v.String()
			default:
				v.WriteByte(s[j])
			}
		}
		return len(s), v.String() // unterminated: all of the rest
	}
	j := i
	for ; j < len(s) && !isSpace(s[j]); j++ {
		if s[j] == '\\' && j+1 < len(s) {
			j++
		}
		v.WriteByte(s[j])
	}
	return j, v.String()
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func skipSpaces(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func isPasswordKey(k string) bool {
	k = strings.ToLower(strings.TrimSpace(k))
	return k == "password" || k == "sslpassword"
}

// appendSecret adds a password value as written and, if it differs, as it
// percent-decodes.
func appendSecret(secrets []string, s string) []string {
	if s == "" {
		return secrets
	}
	secrets = append(secrets, s)
	if d, err := url.PathUnescape(s); err == nil && d != s {
		secrets = append(secrets, d)
	}
	return secrets
}

// minScrub is the shortest password scrub hides wherever it occurs in a message: a
// shorter one would blank out ordinary words.
const minScrub = 3

// scrub hides every password of dsn wherever it occurs in msg.
func scrub(msg, dsn string) string {
	_, secrets := redact(dsn)
	for _, s := range secrets {
		if len(s) >= minScrub {
			msg = strings.ReplaceAll(msg, s, mask)
		}
	}
	return msg
}

// redactedError is an error whose text has been cleaned of the database password; it
// still unwraps to its cause, for errors.Is (context.Canceled and the like).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// parseError explains why pgx could not parse dsn without repeating dsn: pgx's own
// rendering of the string it failed to parse is replaced by Redact's. The cause is not
// kept, as it carries the string itself.
func parseError(err error, dsn string) error {
	msg := err.Error()
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		bare := *pce
		bare.ConnString = ""
		reason := strings.TrimPrefix(bare.Error(), "cannot parse ``: ")
		msg = strings.Replace(msg, pce.Error(), reason, 1)
	}
	return errors.New("parse database url " + Redact(dsn) + ": " + scrub(msg, dsn) +
		" (want postgres://USER:PASSWORD@HOST:PORT/DBNAME?OPTIONS, or libpq's key=value form)")
}
