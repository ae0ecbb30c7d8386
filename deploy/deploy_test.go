package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoRoot is the repository root, relative to this package's directory.
const repoRoot = ".."

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// TestMain removes the binary tmendBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binaryPath != "" {
		_ = os.RemoveAll(filepath.Dir(binaryPath))
	}
	os.Exit(code)
}

// tmendBinary builds cmd/tmend once per test binary.
func tmendBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tmend-deploy-bin")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "tmend")
		cmd := exec.Command("go", "build", "-o", binaryPath, "./cmd/tmend")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binaryErr)
	return binaryPath
}

// tmend runs the binary with args and a clean environment, and returns its exit code
// and combined output.
func tmend(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(tmendBinary(t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err)
	return 0, string(out)
}

// cli is what the binary's help says about its commands and options.
type cli struct {
	commands [][]string                   // every command path, e.g. [migrate up]
	flags    map[string]map[string]string // command path ("" for the root) -> option -> default
}

var (
	cliOnce sync.Once
	cliInfo cli
)

var (
	commandLine = regexp.MustCompile(`^\s{2}(\S+)\s{2,}`)
	flagLine    = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)(?: \w+)?\s{2,}(.*)$`)
	flagDefault = regexp.MustCompile(`\(default "?([^")]*)"?\)\s*$`)
)

// tmendCLI walks `tmend --help` and every command's --help.
func tmendCLI(t *testing.T) cli {
	t.Helper()
	cliOnce.Do(func() {
		cliInfo = cli{flags: map[string]map[string]string{}}
		var walk func(path []string)
		walk = func(path []string) {
			code, out := tmend(t, nil, append(append([]string{}, path...), "--help")...)
			require.Equal(t, 0, code, "tmend %v --help: %s", path, out)
			flags := map[string]string{}
			section := ""
			var subs []string
			for _, line := range strings.Split(out, "\n") {
				if strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " ") {
					section = line
					continue
				}
				switch section {
				case "Available Commands:", "Additional Commands:":
					if m := commandLine.FindStringSubmatch(line); m != nil && m[1] != "help" && m[1] != "completion" {
						subs = append(subs, m[1])
					}
				case "Flags:", "Global Flags:":
					if m := flagLine.FindStringSubmatch(line); m != nil {
						def := ""
						if d := flagDefault.FindStringSubmatch(m[2]); d != nil {
							def = d[1]
						}
						flags[m[1]] = def
					}
				}
			}
			cliInfo.flags[strings.Join(path, " ")] = flags
			if len(path) > 0 {
				cliInfo.commands = append(cliInfo.commands, path)
			}
			for _, s := range subs {
				walk(append(append([]string{}, path...), s))
			}
		}
		walk(nil)
	})
	require.NotEmpty(t, cliInfo.commands)
	return cliInfo
}

// envNames is every TMEND_ variable that names an option of some command.
func (c cli) envNames() map[string]bool {
	out := map[string]bool{}
	for _, flags := range c.flags {
		for name := range flags {
			out["TMEND_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))] = true
		}
	}
	return out
}

// flagDefault returns an option's default as the help shows it.
func (c cli) flagDefault(t *testing.T, command, name string) string {
	t.Helper()
	def, ok := c.flags[command][name]
	require.True(t, ok, "tmend %s has no --%s", command, name)
	return def
}
