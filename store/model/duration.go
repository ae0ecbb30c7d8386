package model

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseDuration is time.ParseDuration with days: "7d", "1d12h".
func ParseDuration(v string) (time.Duration, error) {
	if days, rest, ok := strings.Cut(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q", v)
		}
		d := time.Duration(n) * 24 * time.Hour
		if rest == "" {
			return d, nil
		}
		r, err := time.ParseDuration(rest)
		return d + r, err
	}
	return time.ParseDuration(v)
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
