package model

import (
	"fmt"
	"time"

	prommodel "github.com/prometheus/common/model"
)

// ParseDuration reads a duration in Prometheus's units, y (365d), w, d, h, m, s and ms,
// largest first ("1y", "2w", "1d12h", "720h"), or as time.ParseDuration does, so that
// fractions ("1.5h") keep working.
func ParseDuration(v string) (time.Duration, error) {
	d, err := prommodel.ParseDuration(v)
	if err == nil {
		return time.Duration(d), nil
	}
	if d, terr := time.ParseDuration(v); terr == nil {
		return d, nil
	}
	return 0, fmt.Errorf("bad duration %q: want a number and a unit (y, w, d, h, m, s), like 90d, 2w or 1y", v)
}

// ParseSince reads a time filter: an RFC 3339 time, or a duration back from now (90m,
// 24h, 7d). Empty is the zero time (no filter).
func ParseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := ParseDuration(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time or a duration like 24h or 7d, got %q", v)
	}
	return now.Add(-d), nil
}
