package console

import (
	"math"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// A client may send signInBurst wrong tokens at once, then one every signInEvery: enough
// for a person who mistypes, too few to guess a token.
const (
	signInBurst = 10
	signInEvery = 6 * time.Second
)

// signInLimiter limits wrong sign-ins per client address (an IPv6 client by its /64,
// which one host usually holds whole). Each replica keeps its own counts. It logs once
// per burst of wrong sign-ins: the first wrong token, the first refusal, and a summary
// when the client's allowance is whole again, never a line per guess.
type signInLimiter struct {
	log zerolog.Logger
	now func() time.Time

	mu      sync.Mutex
	clients map[string]*signInClient
}

// signInClient is one client's allowance and what it did in its current burst, which
// began at since.
type signInClient struct {
	lim            *rate.Limiter
	wrong, refused int
	since          time.Time
}

func newSignInLimiter(log zerolog.Logger) *signInLimiter {
	return &signInLimiter{log: log, now: time.Now, clients: map[string]*signInClient{}}
}

// clientKey is the address r came from: the peer's, since a header naming another could
// be sent by anyone. Behind a proxy every client shares the proxy's allowance.
func clientKey(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	addr := ap.Addr().Unmap()
	if addr.Is6() {
		p, _ := addr.Prefix(64) // cannot fail for 64 bits of an IPv6 address
		return p.String()
	}
	return addr.String()
}

// wait is how long the client must wait before it may try a token again; 0 when it may
// now. A refusal counts towards the client's burst.
func (l *signInLimiter) wait(client string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.clients[client]
	if !ok {
		return 0
	}
	now := l.now()
	if c.lim.TokensAt(now) >= 1 {
		return 0
	}
	res := c.lim.ReserveN(now, 1)
	d := res.DelayFrom(now)
	res.CancelAt(now) // only a wrong token spends the allowance
	c.refused++
	if c.refused == 1 {
		l.log.Warn().Str("client", client).Int("wrong", c.wrong).Dur("retry_after", d).
			Msg("console sign-ins refused: too many wrong tokens from this client")
	}
	return d
}

// wrongToken spends one of the client's allowance; the first of a burst is logged.
func (l *signInLimiter) wrongToken(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	c, ok := l.clients[client]
	if !ok {
		c = &signInClient{lim: rate.NewLimiter(rate.Every(signInEvery), signInBurst), since: now}
		l.clients[client] = c
		time.AfterFunc(signInEvery, func() { l.settle(client) })
		l.log.Info().Str("client", client).Msg("console sign-in refused: wrong token")
	}
	c.lim.AllowN(now, 1)
	c.wrong++
}

// settle ends a client's burst once its allowance is whole again: it logs what the
// client did, unless the first line said it all, and forgets the client, so the map
// holds only clients of the last minute. Until then it looks again when the allowance
// should be whole.
func (l *signInLimiter) settle(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.clients[client]
	if !ok {
		return
	}
	now := l.now()
	if missing := signInBurst - c.lim.TokensAt(now); missing > 0 {
		time.AfterFunc(time.Duration(missing*float64(signInEvery)), func() { l.settle(client) })
		return
	}
	delete(l.clients, client)
	if c.wrong > 1 || c.refused > 0 {
		ev := l.log.Info()
		if c.refused > 0 {
			ev = l.log.Warn()
		}
		ev.Str("client", client).Int("wrong", c.wrong).Int("refused", c.refused).
			Dur("duration", now.Sub(c.since).Round(time.Second)).Msg("console sign-in burst ended")
	}
}

// retryAfter is d as the whole seconds of a Retry-After header, at least 1.
func retryAfter(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
