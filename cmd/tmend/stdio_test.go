package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The binary's standard streams as a shell hands them over: 'tmend fix FILE >&-' exits
// 1 (its output would be lost; the runtime puts /dev/null where fd 1 was), while
// '>/dev/null' is fine; '-o /dev/stdout', '--report /dev/stderr' and '-o /proc/self/fd/N'
// write straight to the descriptor when it is a pipe.
func TestStandardStreamsOfTheBinary(t *testing.T) {
	t.Parallel()
	in := filepath.Join(t.TempDir(), "in.json")
	require.NoError(t, os.WriteFile(in, []byte(`[{"role":"user","content":"hi"}]`), 0o644))
	sh := func(script string) (string, int) {
		out, err := exec.Command("sh", "-c", script, "sh", tmendBinary(t), in).CombinedOutput()
		var ee *exec.ExitError
		if err != nil {
			require.ErrorAs(t, err, &ee, "%s", out)
			return string(out), ee.ExitCode()
		}
		return string(out), 0
	}
	for _, tc := range []struct {
		name, script string
		code         int
		out          string
	}{
		{"ClosedStdout", `"$1" fix "$2" >&-`, 1, "standard output is closed"},
		{"ClosedStdoutCheck", `"$1" check "$2" >&-`, 1, "standard output is closed"},
		{"ClosedStdoutWithOutputFile", `"$1" fix -o "$2.out" "$2" >&- && cat "$2.out"`, 0, `"hi"`},
		{"DevNull", `"$1" fix "$2" >/dev/null`, 0, ""},
		{"StdoutIntoAPipe", `"$1" fix -o /dev/stdout "$2" 2>/dev/null | cat`, 0, `[{"role":"user","content":"hi"}]`},
		{"StdoutPipeStatus", `{ "$1" fix -o /dev/stdout "$2" 2>/dev/null; echo "rc=$?" >&2; } | cat >/dev/null`, 0, "rc=0"},
		{"ReportToStderrPipe", `"$1" fix --report /dev/stderr "$2" 2>&1 >/dev/null | cat`, 0, `"type":"summary"`},
		{"ProcSelfFd", `"$1" fix -o /proc/self/fd/3 "$2" 3>&1 2>/dev/null | cat`, 0, `"hi"`},
		{"ClosedStdoutNamed", `"$1" fix -o /dev/stdout "$2" >&-`, 1, "descriptor 1 was closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, code := sh(tc.script)
			require.Equal(t, tc.code, code, out)
			require.Contains(t, out, tc.out)
		})
	}
}
