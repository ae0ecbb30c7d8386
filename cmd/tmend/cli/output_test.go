package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fixture writes n broken sessions to dir/in.jsonl and returns its path and what fix
// writes for it.
func fixture(t *testing.T, dir string, n int) (in, fixed string) {
	t.Helper()
	in = filepath.Join(dir, "in.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(genJSONL(t, "--sessions", strconv.Itoa(n), "--fault-rate", "1", "--messages", "6")), 0o644))
	r := runCLI(t, "", nil, "fix", in)
	require.Equal(t, ExitOK, r.code, r.stderr)
	return in, r.stdout
}

// requireOnly fails when dir holds anything but names (no temp files left behind).
func requireOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	require.ElementsMatch(t, names, got)
}

func TestOutputFollowsSymlinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, fixed := fixture(t, dir, 5)
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "out.jsonl"), []byte("old\n"), 0o600))
	require.NoError(t, os.Symlink("sub/out.jsonl", filepath.Join(dir, "out-link")))
	require.NoError(t, os.Symlink(filepath.Join(sub, "report.jsonl"), filepath.Join(dir, "report-link"))) // dangling

	r := runCLI(t, "", nil, "fix", in, "-o", filepath.Join(dir, "out-link"), "--report", filepath.Join(dir, "report-link"))
	require.Equal(t, ExitOK, r.code, r.stderr)
	for _, link := range []string{"out-link", "report-link"} {
		fi, err := os.Lstat(filepath.Join(dir, link))
		require.NoError(t, err)
		require.Equal(t, os.ModeSymlink, fi.Mode().Type(), "%s must stay a symlink", link)
	}
	b, err := os.ReadFile(filepath.Join(sub, "out.jsonl"))
	require.NoError(t, err)
	require.Equal(t, fixed, string(b))
	fi, err := os.Stat(filepath.Join(sub, "out.jsonl"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "a replaced file keeps its mode")
	b, err = os.ReadFile(filepath.Join(sub, "report.jsonl"))
	require.NoError(t, err)
	require.Len(t, jsonLines(t, string(b)), 6)
	requireOnly(t, sub, "out.jsonl", "report.jsonl")
}

func TestOutputToAFIFOIsWrittenThrough(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, fixed := fixture(t, dir, 3)
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	// Read and write ends at once: opening never blocks, and fix finds a reader.
	rd, err := os.OpenFile(fifo, os.O_RDWR, 0)
	require.NoError(t, err)
	defer func() { _ = rd.Close() }()
	got := make(chan string, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 64<<10)
		_ = rd.SetReadDeadline(time.Now().Add(20 * time.Second))
		for b.Len() < len(fixed) {
			n, err := rd.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		got <- b.String()
	}()
	r := runCLI(t, "", nil, "fix", in, "-o", fifo)
	require.Equal(t, ExitOK, r.code, r.stderr)
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	require.Equal(t, os.ModeNamedPipe, fi.Mode().Type(), "the FIFO must not be replaced")
	require.Equal(t, fixed, <-got)
	requireOnly(t, dir, "in.jsonl", "fifo")
}

// TestOutputToADeviceIsWrittenThrough uses device nodes of its own (root only), so a
// failure can never replace the machine's /dev/full or /dev/null.
func TestOutputToADeviceIsWrittenThrough(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, _ := fixture(t, dir, 3)
	full, null := filepath.Join(dir, "full"), filepath.Join(dir, "null")
	if err := syscall.Mknod(full, syscall.S_IFCHR|0o666, 1<<8|7); err != nil {
		t.Skipf("cannot make device nodes here (%v); the FIFO test covers writing through", err)
	}
	require.NoError(t, syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3))

	r := runCLI(t, "", nil, "fix", in, "-o", full)
	require.Equal(t, ExitRuntime, r.code, r.stderr)
	require.Contains(t, r.stderr, "no space left on device")
	r = runCLI(t, "", nil, "check", in, "--report", full)
	require.Equal(t, ExitRuntime, r.code, r.stderr)
	require.Contains(t, r.stderr, "no space left on device")

	r = runCLI(t, "", nil, "fix", in, "-o", null, "--report", filepath.Join(dir, "report.jsonl"))
	require.Equal(t, ExitOK, r.code, r.stderr)
	for _, dev := range []string{full, null} {
		fi, err := os.Lstat(dev)
		require.NoError(t, err)
		require.Equal(t, os.ModeDevice|os.ModeCharDevice, fi.Mode().Type(), "%s must not be replaced", dev)
	}
	requireOnly(t, dir, "in.jsonl", "full", "null", "report.jsonl")
}

func TestOutputAndReportMustDiffer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, _ := fixture(t, dir, 2)
	x := filepath.Join(dir, "x.jsonl")
	require.NoError(t, os.Symlink("x.jsonl", filepath.Join(dir, "x-link")))
	for _, args := range [][]string{
		{"-o", x, "--report", x},
		{"-o", x, "--report", filepath.Join(dir, ".", "x.jsonl")},
		{"-o", filepath.Join(dir, "x-link"), "--report", x},
	} {
		r := runCLI(t, "", nil, append([]string{"fix", in}, args...)...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "are the same file")
		_, err := os.Stat(x)
		require.True(t, errors.Is(err, os.ErrNotExist), "nothing is written")
	}
	require.NoError(t, os.WriteFile(x, []byte("keep\n"), 0o644))
	require.NoError(t, os.Link(x, filepath.Join(dir, "x-hard")))
	r := runCLI(t, "", nil, "fix", in, "-o", filepath.Join(dir, "x-hard"), "--report", x)
	require.Equal(t, ExitUsage, r.code, r.stderr)
}

// TestOutputNeverReplacesTheInput: a report written over the input file would replace
// the transcripts with it, and -o over it would keep no copy of them (--in-place does).
func TestOutputNeverReplacesTheInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, _ := fixture(t, dir, 2)
	before, err := os.ReadFile(in)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(in, filepath.Join(dir, "in-link")))
	for _, args := range [][]string{
		{"check", in, "--report", in},
		{"fix", in, "--report", filepath.Join(dir, "in-link")},
		{"fix", in, "-o", in},
		{"compact", in, "--report", in},
		{"compact", in, "-o", filepath.Join(dir, ".", "in.jsonl")},
	} {
		r := runCLI(t, "", nil, args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "input file", "%v", args)
		after, err := os.ReadFile(in)
		require.NoError(t, err)
		require.Equal(t, string(before), string(after), "%v", args)
	}
	// A directory's walk reads every *.jsonl file under it: the report is none of them.
	r := runCLI(t, "", nil, "check", dir, "--report", filepath.Join(dir, "sub", "..", "in.jsonl"))
	require.Equal(t, ExitUsage, r.code, r.stderr)
	after, err := os.ReadFile(in)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after))
	r = runCLI(t, "", nil, "check", dir, "--report", filepath.Join(dir, "report.json"))
	require.Equal(t, ExitProblems, r.code, "a report that is no session file may go there: %s", r.stderr)
}

func TestFailedRenameRemovesTempFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dest := filepath.Join(dir, "out.jsonl")
	o, err := createOutput(dest)
	require.NoError(t, err)
	_, err = o.f.WriteString("data\n")
	require.NoError(t, err)
	// The destination turns into a non-empty directory meanwhile: the rename fails.
	require.NoError(t, os.MkdirAll(filepath.Join(dest, "x"), 0o755))
	require.Error(t, o.commit())
	o.abort()
	requireOnly(t, dir, "out.jsonl")
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestFailedWritesToStdoutOrStderrExit1: a command whose output was lost never exits 0
// (or 3).
func TestFailedWritesToStdoutOrStderrExit1(t *testing.T) {
	t.Parallel()
	clean := `[{"role":"user","content":"hi"}]`
	broken := `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`
	devFull, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	require.NoError(t, err)
	defer func() { _ = devFull.Close() }()
	tests := []struct {
		name           string
		in             string
		args           []string
		stdout, stderr io.Writer
	}{
		{"CheckStdout", clean, []string{"check"}, failingWriter{}, io.Discard},
		{"CheckStdoutProblems", broken, []string{"check"}, failingWriter{}, io.Discard},
		{"CheckJSONStdout", clean, []string{"check", "--json"}, failingWriter{}, io.Discard},
		{"CheckDevFull", clean, []string{"check"}, devFull, io.Discard},
		{"FixStdout", clean, []string{"fix"}, failingWriter{}, io.Discard},
		{"FixStderr", broken, []string{"fix"}, io.Discard, failingWriter{}},
		{"FixJSONStderr", clean, []string{"fix", "--json"}, io.Discard, failingWriter{}},
		{"Version", "", []string{"version"}, failingWriter{}, io.Discard},
		{"Help", "", []string{"--help"}, failingWriter{}, io.Discard},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code := Run(context.Background(), tt.args, Env{Stdin: strings.NewReader(tt.in), Stdout: tt.stdout, Stderr: tt.stderr, Getenv: noEnv})
			require.Equal(t, ExitRuntime, code)
		})
	}
	var stderr strings.Builder
	code := Run(context.Background(), []string{"check"}, Env{Stdin: strings.NewReader(clean), Stdout: failingWriter{}, Stderr: &stderr, Getenv: noEnv})
	require.Equal(t, ExitRuntime, code)
	require.Contains(t, stderr.String(), "no space left on device")
}

// -o and --report naming one of the process's descriptors (/dev/stdout, /dev/stderr,
// /dev/fd/N, /proc/self/fd/N) write straight to it, pipe or not: following the
// descriptor's link to a pipe led nowhere (a temp file beside "pipe:[N]").
func TestOutputToADescriptorIsWrittenThrough(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, fixed := fixture(t, dir, 3)
	for _, name := range []string{"/dev/fd/%d", "/proc/self/fd/%d", "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/%d"} {
		t.Run(strings.ReplaceAll(strings.TrimPrefix(name, "/"), "/", "_"), func(t *testing.T) {
			t.Parallel()
			outR, outW, err := os.Pipe()
			require.NoError(t, err)
			repR, repW, err := os.Pipe()
			require.NoError(t, err)
			read := func(r *os.File) <-chan string {
				c := make(chan string, 1)
				go func() { b, _ := io.ReadAll(r); c <- string(b) }()
				return c
			}
			out, rep := read(outR), read(repR)
			r := runCLI(t, "", nil, "fix", "-o", fmt.Sprintf(name, outW.Fd()), "--report", fmt.Sprintf(name, repW.Fd()), in)
			require.NoError(t, outW.Close())
			require.NoError(t, repW.Close())
			require.Equal(t, ExitOK, r.code, r.stderr)
			require.Equal(t, fixed, <-out)
			require.Contains(t, <-rep, `"type":"summary"`)
			require.Empty(t, r.stdout)
			requireOnly(t, dir, "in.jsonl")
		})
	}
	require.True(t, sameOutput("/dev/stdout", "/proc/self/fd/1"), "one descriptor by two names")
	r := runCLI(t, "", nil, "fix", "-o", "/dev/fd/99", in)
	require.Equal(t, ExitRuntime, r.code)
	require.Contains(t, r.stderr, "descriptor 99")
}

// A standard output closed when tmend started (the Go runtime leaves /dev/null opened
// read-write in its place) is output that cannot be written: check, fix and gen exit 1
// before doing anything rather than drop their result; fix -o FILE does not need it.
func TestClosedStdoutExits1(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, _ := fixture(t, dir, 2)
	run := func(args ...string) result {
		var out, errb strings.Builder
		code := Run(context.Background(), args, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
			Getenv: func(string) string { return "" }, StdoutClosed: true})
		return result{code, out.String(), errb.String()}
	}
	for _, args := range [][]string{{"fix", in}, {"check", in}, {"gen", "--sessions", "1"}} {
		r := run(args...)
		require.Equal(t, ExitRuntime, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "closed", args)
		require.Empty(t, r.stdout, args)
	}
	r := run("fix", "-o", filepath.Join(dir, "out.jsonl"), in)
	require.Equal(t, ExitOK, r.code, r.stderr)

	// What a closed descriptor becomes, as the runtime leaves it: /dev/null read-write.
	f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	w, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer w.Close()
	require.True(t, closedAtStart(int(f.Fd())), "/dev/null read-write is a closed descriptor")
	require.False(t, closedAtStart(int(w.Fd())), ">/dev/null is not")
}
