package files

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// lineReader must split any input into the same lines and terminators as a plain split,
// whatever the read sizes and wherever lines cross chunk boundaries, and hand over a line
// over the limit as a prefix plus the rest.
func TestLineReaderSplitsLikeSplit(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var in bytes.Buffer
	var want []string // line + terminator
	for i := range 400 {
		n := rng.IntN(2000)
		if i%50 == 0 {
			n = chunkSize/2 + rng.IntN(chunkSize) // crosses chunks
		}
		line := strings.Repeat(string(rune('a'+i%26)), n)
		eol := []string{"\n", "\r\n"}[rng.IntN(2)]
		want = append(want, line+eol)
		in.WriteString(line + eol)
	}
	in.WriteString("last line, no newline")
	want = append(want, "last line, no newline")
	const max = chunkSize // lines longer than this are "full"

	for name, r := range map[string]io.Reader{
		"whole":   bytes.NewReader(in.Bytes()),
		"halves":  iotest.HalfReader(bytes.NewReader(in.Bytes())),
		"onebyte": iotest.OneByteReader(bytes.NewReader(in.Bytes()[:3*chunkSize])),
	} {
		lr := &lineReader{r: r}
		var got []string
		for {
			data, eol, full, err := lr.next(max)
			if full {
				var rest bytes.Buffer
				_, cerr := lr.copyRest(&rest, data)
				require.NoError(t, cerr)
				got = append(got, rest.String())
				continue
			}
			if len(data) > 0 || len(eol) > 0 {
				got = append(got, string(data)+string(eol))
			}
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
		}
		if name == "onebyte" { // a prefix of the input: compare what it covers
			require.Equal(t, string(in.Bytes()[:3*chunkSize]), strings.Join(got, ""), name)
			continue
		}
		require.Equal(t, len(want), len(got), name)
		for i := range want {
			require.Equal(t, want[i], got[i], "%s: line %d", name, i+1)
		}
	}
}

// Copying a line too large to hold goes through the chunks without keeping them.
func TestLineReaderCopiesAHugeLineInLittleMemory(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 20*chunkSize) + "\nnext\n"
	lr := &lineReader{r: strings.NewReader(huge)}
	data, _, full, err := lr.next(chunkSize)
	require.NoError(t, err)
	require.True(t, full)
	n, err := lr.copyRest(io.Discard, data)
	require.NoError(t, err)
	require.EqualValues(t, 20*chunkSize+1, n)
	require.Empty(t, lr.retired, "chunks passed through must not be held")
	data, _, _, err = lr.next(chunkSize)
	require.NoError(t, err)
	require.Equal(t, "next", string(data))
}
