package repair

import (
	"encoding/binary"
	"math/bits"
	"testing"
)

// specialBytes must find the first byte that is not plainString, for every byte value at
// every position, whatever special bytes follow it.
func TestSpecialBytesFindsTheFirst(t *testing.T) {
	for c := range 256 {
		for pos := range 8 {
			for _, after := range []byte{'a', 0, '"', 0xff} {
				w := []byte("abcdefgh")
				w[pos] = byte(c)
				for j := pos + 1; j < 8; j++ {
					w[j] = after
				}
				m := specialBytes(binary.LittleEndian.Uint64(w))
				first := -1
				for j, b := range w {
					if !plainString[b] {
						first = j
						break
					}
				}
				got := -1
				if m != 0 {
					got = bits.TrailingZeros64(m) / 8
				}
				if got != first {
					t.Fatalf("%q: first special byte at %d, found %d", w, first, got)
				}
			}
		}
	}
}
