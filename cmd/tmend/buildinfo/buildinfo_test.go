package buildinfo

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestFromBuild(t *testing.T) {
	t.Parallel()
	const rev = "0123456789abcdef0123456789abcdef01234567"
	checkout := func(modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/tmend/tmend", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "-trimpath", Value: "true"}, {Key: "vcs", Value: "git"},
				{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: modified}}}
	}
	module := func(v string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/tmend/tmend", Version: v}}
	}
	tests := []struct {
		name  string
		bi    *debug.BuildInfo
		stamp stamp
		want  Info
	}{
		{"NoBuildInfo", nil, stamp{}, Info{Version: "dev", GoVersion: runtime.Version()}},
		{"DevelWithoutVCS", module("(devel)"), stamp{}, Info{Version: "dev", GoVersion: "go1.26.0"}},
		{"GoInstallRelease", module("v1.2.3"), stamp{}, Info{Version: "v1.2.3", GoVersion: "go1.26.0"}},
		{"GoInstallPseudoVersion", module("v0.0.0-20260102030405-0123456789ab"), stamp{},
			Info{Version: "v0.0.0-20260102030405-0123456789ab", Commit: "0123456789ab", Date: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0"}},
		{"PseudoVersionAfterPrerelease", module("v1.3.0-rc.1.0.20260102030405-0123456789ab"), stamp{},
			Info{Version: "v1.3.0-rc.1.0.20260102030405-0123456789ab", Commit: "0123456789ab", Date: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0"}},
		{"DirtyPseudoVersion", module("v1.2.4-0.20260102030405-0123456789ab+dirty"), stamp{},
			Info{Version: "v1.2.4-0.20260102030405-0123456789ab+dirty", Commit: "0123456789ab", Date: "2026-01-02T03:04:05Z",
				GoVersion: "go1.26.0", Modified: true}},
		{"CheckoutClean", checkout("false"), stamp{}, Info{Version: "dev", Commit: rev, Date: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0"}},
		{"CheckoutModified", checkout("true"), stamp{},
			Info{Version: "dev", Commit: rev, Date: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0", Modified: true}},
		{"StampedWinsEverywhere", checkout("true"), stamp{version: "v2.0.0", commit: "fedcba", date: "2027-01-01T00:00:00Z", modified: "false"},
			Info{Version: "v2.0.0", Commit: "fedcba", Date: "2027-01-01T00:00:00Z", GoVersion: "go1.26.0"}},
		{"StampedVersionOnly", checkout("false"), stamp{version: "v2.0.0"},
			Info{Version: "v2.0.0", Commit: rev, Date: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0"}},
		{"StampedOverModuleVersion", module("v0.0.0-20260102030405-0123456789ab"), stamp{version: "v2.0.0", commit: rev},
			Info{Version: "v2.0.0", Commit: rev, Date: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0"}},
		{"UnparsableModifiedStampIgnored", checkout("true"), stamp{modified: "maybe"},
			Info{Version: "dev", Commit: rev, Date: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0", Modified: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Empty(t, cmp.Diff(tt.want, fromBuild(tt.bi, tt.stamp)))
		})
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "v1.2.3 (commit 0123456789ab, 2026-01-02T03:04:05Z, go1.26.0, modified)",
		Info{Version: "v1.2.3", Commit: "0123456789abcdef", Date: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0", Modified: true}.String())
	require.Equal(t, "dev (go1.26.0)", Info{Version: "dev", GoVersion: "go1.26.0"}.String())
}

// TestRealBuilds builds a program that prints Get() the ways tmend is built: from a git
// checkout (what the toolchain records) and with the -X flags of the Makefile,
// deploy/Dockerfile and .goreleaser.yaml. The program lives in a throwaway module that is
// also named github.com/tmend/tmend, so the -X symbol names are the real ones.
func TestRealBuilds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src, err := os.ReadFile("buildinfo.go")
	require.NoError(t, err)
	write := func(t *testing.T, name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write(t, "go.mod", "module github.com/tmend/tmend\n\ngo 1.22\n")
	write(t, "cmd/tmend/buildinfo/buildinfo.go", string(src))
	write(t, "cmd/printinfo/main.go", `package main

import (
	"encoding/json"
	"os"

	"github.com/tmend/tmend/cmd/tmend/buildinfo"
)

func main() { _ = json.NewEncoder(os.Stdout).Encode(buildinfo.Get()) }
`)
	gitEnv := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
	run := func(t *testing.T, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %v:\n%s", name, args, out)
		return strings.TrimSpace(string(out))
	}
	run(t, gitEnv, "git", "init", "-q")
	run(t, gitEnv, "git", "add", ".")
	run(t, gitEnv, "git", "commit", "-q", "-m", "init")
	run(t, gitEnv, "git", "tag", "v1.2.3")
	rev := run(t, gitEnv, "git", "rev-parse", "HEAD")

	build := func(t *testing.T, ldflags string) Info {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "printinfo")
		// The machine's GOFLAGS may turn VCS stamping off; a checkout build has it on.
		env := append(gitEnv, "GOFLAGS=-buildvcs=true", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
		run(t, env, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/printinfo")
		var info Info
		require.NoError(t, json.Unmarshal([]byte(run(t, nil, bin)), &info))
		return info
	}
	goVersion := runtime.Version()
	// The subtests share one checkout and run in order (not in parallel): the last one
	// dirties it.

	t.Run("Checkout", func(t *testing.T) {
		require.Empty(t, cmp.Diff(Info{Version: "v1.2.3", Commit: rev, Date: "2026-01-02T03:04:05Z", GoVersion: goVersion}, build(t, "")))
	})
	t.Run("StampedLikeTheMakefile", func(t *testing.T) {
		flags := ldflagsOf(t, "../../../Makefile")
		require.Len(t, flags, 4, "the Makefile stamps version, commit, date and modified")
		stamped := map[string]string{"version": "v9.9.9", "commit": "stamped-commit", "date": "2030-01-01T00:00:00Z", "modified": "true"}
		var ld []string
		for _, name := range flags {
			ld = append(ld, "-X github.com/tmend/tmend/cmd/tmend/buildinfo."+name+"="+stamped[name])
		}
		require.Empty(t, cmp.Diff(Info{Version: "v9.9.9", Commit: "stamped-commit", Date: "2030-01-01T00:00:00Z", GoVersion: goVersion,
			Modified: true}, build(t, strings.Join(ld, " "))))
	})
	// Last: it dirties the tree.
	t.Run("CheckoutModified", func(t *testing.T) {
		write(t, "cmd/printinfo/extra.go", "package main\n")
		got := build(t, "")
		require.True(t, got.Modified)
		require.Equal(t, rev, got.Commit)
		require.Equal(t, "v1.2.3+dirty", got.Version)
	})
}

// TestEveryBuildStampsTheSameNames checks that the Makefile, deploy/Dockerfile and
// .goreleaser.yaml each stamp all four variables, by names this package declares (-X
// with an unknown name is silently ignored by the linker).
func TestEveryBuildStampsTheSameNames(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"../../../Makefile", "../../../deploy/Dockerfile", "../../../.goreleaser.yaml"} {
		require.ElementsMatch(t, []string{"version", "commit", "date", "modified"}, ldflagsOf(t, path), path)
	}
}

// ldflagsOf returns the buildinfo variables a build file stamps with -X, and fails on a
// name this package does not declare.
func ldflagsOf(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	declared := stampVars(t)
	var names []string
	for _, m := range regexp.MustCompile(`-X[ =]'?github\.com/tmend/tmend/cmd/tmend/buildinfo\.(\w+)=`).FindAllStringSubmatch(string(b), -1) {
		require.True(t, declared[m[1]], "%s stamps buildinfo.%s, which does not exist", path, m[1])
		names = append(names, m[1])
	}
	return names
}

// stampVars returns the names of the package's string variables, the ones -X can set.
func stampVars(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "buildinfo.go", nil, 0)
	require.NoError(t, err)
	vars := map[string]bool{}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "string" {
					for _, n := range vs.Names {
						vars[n.Name] = true
					}
				}
			}
		}
	}
	require.Len(t, vars, 4, "version, commit, date, modified")
	return vars
}
