//go:build unix

package files

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Spans that continue each other become one; the buffer's spans survive its growth.
func TestOutputJoinsSpans(t *testing.T) {
	t.Parallel()
	in := []byte("abcdefgh")
	o := &output{in: in}
	o.Keep(0, 2)
	o.Keep(2, 4) // continues: joined
	o.Write([]byte("XY"))
	o.Write(bytes.Repeat([]byte("Z"), 4096)) // grows buf: the spans are offsets
	o.Keep(5, 6)                             // a gap: a span of its own
	o.in = []byte("abcdefgh")                // another array with the same bytes
	o.Keep(6, 8)                             // same offsets, other array: not joined
	require.Len(t, o.spans, 4)
	require.Equal(t, 4+2+4096+1+2, o.n)
	got := bytes.Join(o.buffers(nil), nil)
	require.Equal(t, "abcdXY"+string(bytes.Repeat([]byte("Z"), 4096))+"fgh", string(got))
}

// writeBuffers writes every buffer in order to a file or a pipe, however many there are
// (more than one writev takes) and however little the pipe takes at a time.
// One writev takes at most iovMax buffers and maxWrite bytes. The large buffers are
// views of a sparse mapped file, so no memory is touched.
func TestWriteWindow(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	require.NoError(t, f.Truncate(3*maxWrite))
	big, err := unix.Mmap(int(f.Fd()), 0, 3*maxWrite, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer func() { require.NoError(t, unix.Munmap(big)) }()

	small := make([][]byte, iovMax+5)
	for i := range small {
		small[i] = []byte("x")
	}
	require.Equal(t, iovMax, len(window(small)))

	// Lengths compared as numbers: a failure must not print gigabytes.
	half := [][]byte{big[:maxWrite/2], big[:maxWrite/2], big[:1]}
	require.Equal(t, 2, len(window(half)), "exactly maxWrite bytes")
	require.Equal(t, 2, len(window(half[1:])))

	huge := [][]byte{big[:2*maxWrite+3], big[:5]}
	w := window(huge)
	require.Equal(t, 1, len(w))
	require.Equal(t, maxWrite, len(w[0]))
	require.Equal(t, 2*maxWrite+3, len(huge[0]), "the caller's buffer is not cut")
}

func TestWriteBuffers(t *testing.T) {
	t.Parallel()
	var bufs [][]byte
	var want bytes.Buffer
	for i := range 3 * iovMax {
		b := fmt.Appendf(nil, "%d:%s;", i, bytes.Repeat([]byte{'a' + byte(i%26)}, i%997))
		bufs = append(bufs, b)
		want.Write(b)
	}

	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	require.NoError(t, writeBuffers(f, append([][]byte(nil), bufs...)))
	got, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.True(t, bytes.Equal(want.Bytes(), got), "file content differs")

	r, w, err := os.Pipe() // non-blocking, and smaller than what is written: short writes
	require.NoError(t, err)
	read := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		read <- b
	}()
	require.NoError(t, writeBuffers(w, append([][]byte(nil), bufs...)))
	require.NoError(t, w.Close())
	require.True(t, bytes.Equal(want.Bytes(), <-read), "pipe content differs")
	require.NoError(t, r.Close())
}
