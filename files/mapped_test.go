//go:build unix

package files

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/report"
)

func writeTemp(t *testing.T, content string) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// openForWriting opens the file at path for writing (to truncate it under a run).
func openForWriting(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// tempOutput creates a file for a run's output.
func tempOutput(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "out.jsonl"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func sessions(t *testing.T, n, messages int, seed uint64) string {
	t.Helper()
	var b bytes.Buffer
	_, err := gen.WriteJSONLines(t.Context(), &b, gen.Config{Sessions: n, Dialect: repair.OpenClaw, Messages: messages, FaultRate: 0.5, Seed: seed})
	require.NoError(t, err)
	return b.String()
}

// Only a regular, non-empty file read from its start is mapped; anything else is read.
func TestMapFile(t *testing.T) {
	t.Parallel()
	f := writeTemp(t, "{}\n")
	m := mapFile(f)
	require.NotNil(t, m)
	require.Equal(t, "{}\n", string(m.data))
	m.close()
	off, err := f.Seek(0, io.SeekCurrent)
	require.NoError(t, err)
	require.EqualValues(t, 3, off, "closing leaves the offset where reading would")

	require.Nil(t, mapFile(f), "not at its start")
	require.Nil(t, mapFile(writeTemp(t, "")), "empty")
	require.Nil(t, mapFile(strings.NewReader("{}\n")))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer func() { _ = r.Close(); _ = w.Close() }()
	require.Nil(t, mapFile(r), "a pipe")
}

// A mapped file must give the same output and reports as the same bytes read as a
// stream, on every kind of line the stream knows.
func TestMappedFileReadsLikeAStream(t *testing.T) {
	t.Parallel()
	body := sessions(t, 400, 45, 7)
	big := `{"id":"big","messages":[{"role":"user","content":"` + strings.Repeat("x", 200<<10) + `"}]}`
	inputs := map[string]string{
		"Plain":   body,
		"Awkward": "\ufeff\n" + strings.ReplaceAll(body[:len(body)/2], "\n", "\r\n") + "not json\n" + big + "\n \n" + strings.TrimSuffix(body[len(body)/2:], "\n"),
		"BigLast": body + big,
		"Document": `[{"role":"user","content":"ls"},` + "\n" +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`,
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, fix := range []bool{false, true} {
				o := Options{Fix: fix, MaxBytes: 100 << 10, Workers: 3}
				var wantOut, wantRep, gotOut, gotRep bytes.Buffer
				want, err := Run(t.Context(), strings.NewReader(in), &wantOut, o, report.NewJSON(&wantRep))
				require.NoError(t, err)
				got, err := Run(t.Context(), writeTemp(t, in), &gotOut, o, report.NewJSON(&gotRep))
				require.NoError(t, err)
				require.Equal(t, want, got)
				require.True(t, wantOut.String() == gotOut.String(), "output differs (fix %v)", fix)
				require.Equal(t, wantRep.String(), gotRep.String())
				if fix { // to a file: written by writev, from the mapping
					out := tempOutput(t)
					_, err = Run(t.Context(), writeTemp(t, in), out, o)
					require.NoError(t, err)
					b, err := os.ReadFile(out.Name())
					require.NoError(t, err)
					require.True(t, wantOut.String() == string(b), "file output differs")
				}
			}
		})
	}
}

// truncator truncates the input file when the first session is reported, while most of
// the file is still to be read.
type truncator struct{ f *os.File }

func (tr truncator) Session(s *report.Session) error {
	if s.Line == 1 {
		return tr.f.Truncate(0)
	}
	return nil
}

func (truncator) Summary(*report.Summary) error { return nil }

// A mapped file truncated during the run faults where it is read: the run ends with
// errInputChanged, not with the process.
func TestTruncatedWhileMapped(t *testing.T) {
	t.Parallel()
	f := writeTemp(t, sessions(t, 20*batchLines, 10, 8))
	w := openForWriting(t, f.Name())

	// One worker and its queues hold a few batches; the reader can be no further ahead.
	_, err := Run(context.Background(), f, io.Discard, Options{Fix: true, Workers: 1}, truncator{w})
	require.ErrorIs(t, err, errInputChanged)
}

// truncatingWriter truncates the input file, then writes to a real file: a write from
// the mapping's lost pages fails in the kernel (EFAULT) rather than faulting.
type truncatingWriter struct{ in, out *os.File }

func (w truncatingWriter) Write(p []byte) (int, error) {
	if err := w.in.Truncate(0); err != nil {
		return 0, err
	}
	return w.out.Write(p)
}

// A too-large line goes from the mapping to the output unread: if the file loses it
// meanwhile, the run still ends with errInputChanged, not a write error.
func TestTruncatedDuringAPassthrough(t *testing.T) {
	t.Parallel()
	big := `{"id":"big","messages":[{"role":"user","content":"` + strings.Repeat("x", 2<<20) + `"}]}`
	f := writeTemp(t, big+"\n"+sessions(t, 10, 10, 9))
	w, out := openForWriting(t, f.Name()), tempOutput(t)

	_, err := Run(t.Context(), f, truncatingWriter{w, out}, Options{Fix: true, MaxBytes: 1 << 20})
	require.ErrorIs(t, err, errInputChanged)
}

// A record's bytes go from the mapping to the output when its batch is written: if the
// file loses them after they were repaired, the run ends with errInputChanged, not with a
// write error.
func TestTruncatedBeforeTheWrite(t *testing.T) {
	t.Parallel()
	const n = 20 // one batch
	f := writeTemp(t, sessions(t, n, 10, 10))
	w, out := openForWriting(t, f.Name()), tempOutput(t)
	m := mapFile(f)
	require.NotNil(t, m)
	defer m.close()

	var truncErr error
	cfg := streamConfig{mapped: m.data, release: m.release, out: out, maxBytes: 1 << 20, workers: 1,
		process: func(it *fileRecord, o *output) {
			it.outcome = processRecord(o, it.data, it.line, repair.Options{})
			if it.line == n { // the last record is repaired: nothing reads the file again
				truncErr = w.Truncate(0)
			}
		},
		emit: func(*fileRecord) error { return nil },
	}
	err := runStream(t.Context(), cfg)
	require.NoError(t, truncErr)
	require.ErrorIs(t, err, errInputChanged)
}

var sink byte

// guard turns only faults inside the mapping into errInputChanged: any other goes on.
func TestGuardPassesOtherFaults(t *testing.T) {
	t.Parallel()
	m := mapFile(writeTemp(t, "{}\n"))
	require.NotNil(t, m)
	defer m.close()
	elsewhere, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_NONE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	defer func() { _ = unix.Munmap(elsewhere) }()

	require.ErrorIs(t, guard(m.data, func() error { sink = m.data[0]; return unix.EFAULT }), errInputChanged)
	require.Panics(t, func() {
		_ = guard(m.data, func() error { sink = elsewhere[0]; return nil })
	})
}
