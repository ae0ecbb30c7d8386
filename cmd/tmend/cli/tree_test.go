package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sessionFixtures = "../../../files/testdata/sessionfile/"

// sessionDir lays out a sessions directory as pi does (one folder per project) with a
// broken and a clean session file, a file of another kind and a symlink to outside.
func sessionDir(t *testing.T) (dir, broken, clean string) {
	t.Helper()
	dir = t.TempDir()
	proj := filepath.Join(dir, "--home-dev-proj--")
	require.NoError(t, os.Mkdir(proj, 0o755))
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to, b, 0o600))
	}
	broken = filepath.Join(proj, "2026-01-10T09-00-00-000Z_s1.jsonl")
	clean = filepath.Join(proj, "2026-01-10T10-00-00-000Z_s2.jsonl")
	copyFile(sessionFixtures+"missing_result_mid.in.jsonl", broken)
	copyFile(sessionFixtures+"clean_other_entries.in.jsonl", clean)
	copyFile(sessionFixtures+"orphan_result.in.jsonl", filepath.Join(dir, "notes.txt"))
	outside := filepath.Join(t.TempDir(), "outside.jsonl")
	copyFile(sessionFixtures+"orphan_result.in.jsonl", outside)
	require.NoError(t, os.Symlink(outside, filepath.Join(proj, "link.jsonl")))
	return dir, broken, clean
}

func TestCheckDirectory(t *testing.T) {
	t.Parallel()
	dir, broken, _ := sessionDir(t)
	r := runCLI(t, "", nil, "check", "--json", dir)
	require.Equal(t, ExitProblems, r.code, r.stderr)
	lines := jsonLines(t, r.stdout)
	require.Len(t, lines, 3) // two session files, then the summary
	require.Equal(t, broken, lines[0]["file"])
	require.Equal(t, "broken", lines[0]["status"])
	require.Equal(t, "clean", lines[1]["status"])
	sum := lines[2]
	require.EqualValues(t, 2, sum["files"])
	require.EqualValues(t, 1, sum["files_skipped"])
	require.Nil(t, sum["files_rewritten"])

	// The text summary counts files rewritten only for fix --in-place: check rewrites none.
	r = runCLI(t, "", nil, "check", dir)
	require.Equal(t, ExitProblems, r.code, r.stderr)
	require.Regexp(t, `files +2 \(`, r.stdout)
	require.NotContains(t, r.stdout, "rewritten")
	r = runCLI(t, "", nil, "fix", "--in-place", filepath.Dir(broken))
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Regexp(t, `rewritten +1`, r.stderr)
	r = runCLI(t, "", nil, "fix", "--in-place", filepath.Dir(broken))
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Regexp(t, `rewritten +0`, r.stderr)
}

func TestFixInPlace(t *testing.T) {
	t.Parallel()
	dir, broken, clean := sessionDir(t)
	before, err := os.ReadFile(broken)
	require.NoError(t, err)
	cleanBefore, err := os.Stat(clean)
	require.NoError(t, err)
	outside, err := os.Readlink(filepath.Join(filepath.Dir(broken), "link.jsonl"))
	require.NoError(t, err)
	outsideBefore, err := os.ReadFile(outside)
	require.NoError(t, err)

	r := runCLI(t, "", nil, "fix", "--in-place", "--now", "2026-02-01T12:00:00Z", dir)
	require.Equal(t, ExitOK, r.code, r.stderr)
	backup := broken + ".tmend-20260201T120000Z.bak"
	require.Contains(t, r.stderr, "the prior file is kept as "+backup)
	require.Regexp(t, `(?s)sessions .*repaired .*the prior file is kept as`, r.stderr) // after the report

	// The prior bytes are in the backup; the file is the golden repair.
	kept, err := os.ReadFile(backup)
	require.NoError(t, err)
	require.Equal(t, before, kept)
	want, err := os.ReadFile(sessionFixtures + "missing_result_mid.want.jsonl")
	require.NoError(t, err)
	got, err := os.ReadFile(broken)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	fi, err := os.Stat(broken)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// The clean file is not rewritten, the symlink's target not touched, no temp left.
	cleanAfter, err := os.Stat(clean)
	require.NoError(t, err)
	require.True(t, os.SameFile(cleanBefore, cleanAfter))
	require.Equal(t, cleanBefore.ModTime(), cleanAfter.ModTime())
	outsideAfter, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, outsideBefore, outsideAfter)
	entries, err := os.ReadDir(filepath.Dir(broken))
	require.NoError(t, err)
	require.Len(t, entries, 4) // the two files, the backup, the link

	// A second run finds nothing to do and makes no second backup.
	r = runCLI(t, "", nil, "fix", "--in-place", "--now", "2026-02-01T12:00:01Z", dir)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.NotContains(t, r.stderr, "prior file")
	r = runCLI(t, "", nil, "check", dir)
	require.Equal(t, ExitOK, r.code, r.stdout)

	// Broken again and fixed within the same second: the first backup stays, the second
	// gets the next name.
	require.NoError(t, os.WriteFile(broken, before, 0o600))
	r = runCLI(t, "", nil, "fix", "--in-place", "--now", "2026-02-01T12:00:00Z", dir)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "the prior file is kept as "+broken+".tmend-20260201T120000Z-2.bak")
	kept, err = os.ReadFile(backup)
	require.NoError(t, err)
	require.Equal(t, before, kept)
}

func TestFixInPlaceJSONNamesTheBackup(t *testing.T) {
	t.Parallel()
	dir, broken, _ := sessionDir(t)
	r := runCLI(t, "", nil, "fix", "--in-place", "--json", "--now", "2026-02-01T12:00:00Z", dir)
	require.Equal(t, ExitOK, r.code, r.stderr)
	lines := jsonLines(t, r.stderr)
	require.Len(t, lines, 3)
	require.Equal(t, "repaired", lines[0]["status"])
	require.Equal(t, broken+".tmend-20260201T120000Z.bak", lines[0]["backup"])
	require.Nil(t, lines[1]["backup"]) // the clean file is not rewritten
	require.EqualValues(t, 1, lines[2]["files_rewritten"])
}

func TestFixInPlaceUsage(t *testing.T) {
	t.Parallel()
	dir, broken, _ := sessionDir(t)
	for name, args := range map[string][]string{
		"Stdin":          {"fix", "--in-place"},
		"WithOutput":     {"fix", "--in-place", "-o", filepath.Join(dir, "x"), broken},
		"DirWithoutFlag": {"fix", dir},
	} {
		r := runCLI(t, "", nil, args...)
		require.Equal(t, ExitUsage, r.code, name+": "+r.stderr)
	}
}

// TestFixInPlaceNamesTheFilesItCouldNotWrite: files whose temp file cannot be created
// beside them (a name at the file system's limit) are named on one line, the others
// still repaired.
func TestFixInPlaceNamesTheFilesItCouldNotWrite(t *testing.T) {
	t.Parallel()
	dir, broken, _ := sessionDir(t)
	b, err := os.ReadFile(broken)
	require.NoError(t, err)
	long := filepath.Join(dir, strings.Repeat("a", 240)+".jsonl")
	require.NoError(t, os.WriteFile(long, b, 0o600))
	require.NoError(t, os.WriteFile(long[:len(long)-6]+"b.jsonl", b, 0o600))
	r := runCLI(t, "", nil, "fix", "--in-place", dir)
	require.Equal(t, ExitRuntime, r.code, r.stderr)
	require.Contains(t, r.stderr, "tmend: 2 files could not be processed: "+long+": create a temp file beside it: ")
	require.NotContains(t, r.stderr, `\n`)
	require.Contains(t, r.stderr, "repaired "+broken)
}

// A directory whose files are none of them *.jsonl was not read: a usage error that says
// so, not "sessions 0" and exit 0. An empty directory has nothing to check.
func TestCheckDirectoryWithoutSessionFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chat.json"), []byte(`[{"role":"user","content":"hi"}]`), 0o600))
	r := runCLI(t, "", nil, "check", dir)
	require.Equal(t, ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "no *.jsonl file under "+dir+", only 1 other file(s)")
	r = runCLI(t, "", nil, "check", t.TempDir())
	require.Equal(t, ExitOK, r.code, r.stderr)
}
