package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// gregorianOffset is the number of 100 ns intervals from 1582-10-15, where UUID time
// starts, to 1970-01-01.
const gregorianOffset = 0x01B21DD213814000

// uuid6 makes an id as LangGraph's uuid6(clockseq) does (RFC 9562 version 6, the time
// first, so that ids sort by time as text): clockseq is the checkpoint's step, the node
// random. google/uuid sets the clock sequence only process-wide, hence by hand.
func uuid6(t time.Time, clockseq int64) string {
	ts := uint64(t.UnixNano()/100) + gregorianOffset
	var node [6]byte
	_, _ = rand.Read(node[:]) // never fails (crypto/rand)
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%x", ts>>28, (ts>>12)&0xffff, 0x6000|ts&0x0fff, 0x8000|uint64(clockseq)&0x3fff, node)
}

// uuid6Time is the time in a version 6 UUID; the zero time for any other id.
func uuid6Time(id string) time.Time {
	h := strings.ReplaceAll(id, "-", "")
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 16 || b[6]>>4 != 6 {
		return time.Time{}
	}
	ts := uint64(b[0])<<52 | uint64(b[1])<<44 | uint64(b[2])<<36 | uint64(b[3])<<28 |
		uint64(b[4])<<20 | uint64(b[5])<<12 | uint64(b[6]&0x0f)<<8 | uint64(b[7])
	return time.Unix(0, int64(ts-gregorianOffset)*100).UTC()
}
