package deploy

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var systemdDir = filepath.Join(repoRoot, "deploy", "systemd")

// unit is a systemd unit file: its settings by section, and for a service the tmend
// command line it runs.
type unit struct {
	path     string
	settings map[string][]string // "Section.Key" -> values in order
	lines    []string            // the [Service] lines, for the hardening comparison
	exec     []string            // ExecStart's tmend arguments
}

func loadUnits(t *testing.T) []unit {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(systemdDir, "*.service"))
	require.NoError(t, err)
	timers, err := filepath.Glob(filepath.Join(systemdDir, "*.timer"))
	require.NoError(t, err)
	var out []unit
	for _, p := range append(paths, timers...) {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		u := unit{path: p, settings: map[string][]string{}}
		section := ""
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			switch {
			case line == "" || strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, "["):
				section = strings.Trim(line, "[]")
			default:
				k, v, ok := strings.Cut(line, "=")
				require.True(t, ok, "%s: %q", p, line)
				u.settings[section+"."+k] = append(u.settings[section+"."+k], v)
				if section == "Service" {
					u.lines = append(u.lines, line)
				}
			}
		}
		if v := u.settings["Service.ExecStart"]; len(v) > 0 {
			rest, ok := strings.CutPrefix(v[0], "/usr/local/bin/tmend ")
			require.True(t, ok, "%s: ExecStart runs /usr/local/bin/tmend", p)
			u.exec = shellWords(rest)
		}
		out = append(out, u)
	}
	return out
}

func (u unit) get(key string) string {
	v := u.settings[key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// hardening are the [Service] directives that confine a unit; every service has the
// daemon's set, exactly.
var hardening = regexp.MustCompile(`^(DynamicUser|NoNewPrivileges|Protect\w+|Private\w+|Restrict\w+|LockPersonality|MemoryDenyWriteExecute|CapabilityBoundingSet|SystemCall\w+|UMask)=`)

func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	units := loadUnits(t)
	byName := map[string]unit{}
	for _, u := range units {
		byName[filepath.Base(u.path)] = u
	}
	require.ElementsMatch(t, []string{"tmend.service", "tmend-scan.service", "tmend-scan.timer", "tmend-prune.service", "tmend-prune.timer"},
		mapKeys(byName))

	var daemonHardening []string
	for _, l := range byName["tmend.service"].lines {
		if hardening.MatchString(l) {
			daemonHardening = append(daemonHardening, l)
		}
	}
	require.GreaterOrEqual(t, len(daemonHardening), 20)
	for _, want := range []string{"DynamicUser=yes", "NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet="} {
		require.Contains(t, daemonHardening, want)
	}

	envFile := envFile(t)
	cli := tmendCLI(t)
	for _, u := range units {
		name := filepath.Base(u.path)
		if strings.HasSuffix(name, ".timer") {
			// A timer starts the service of its name, and is enabled with timers.target.
			svc, ok := byName[strings.TrimSuffix(name, ".timer")+".service"]
			require.True(t, ok, "%s has no service", name)
			require.Equal(t, "oneshot", svc.get("Service.Type"), "%s's service", name)
			require.NotEmpty(t, u.get("Timer.OnCalendar"), name)
			require.Equal(t, "true", u.get("Timer.Persistent"), "%s: a missed run runs at boot", name)
			require.Equal(t, "timers.target", u.get("Install.WantedBy"), name)
			continue
		}
		var got []string
		for _, l := range u.lines {
			if hardening.MatchString(l) {
				got = append(got, l)
			}
		}
		require.Equal(t, daemonHardening, got, "%s is hardened like tmend.service", name)
		require.Equal(t, "/etc/tmend/tmend.env", u.get("Service.EnvironmentFile"), name)
		require.NotNil(t, u.exec, name)

		var soft int64
		for _, e := range u.settings["Service.Environment"] {
			if v, ok := strings.CutPrefix(e, "GOMEMLIMIT="); ok {
				soft = parseGoMemLimit(t, v)
			}
		}
		setting := func(option string) string {
			if v, ok := envFile["TMEND_"+strings.ToUpper(strings.ReplaceAll(option, "-", "_"))]; ok {
				return v
			}
			return cli.flagDefault(t, "scan", option)
		}
		checkMemory(t, name, memoryQuantity(t, u.get("Service.MemoryMax")), soft, u.exec[0], setting)
	}
	require.Equal(t, []string{"prune", "--older-than", "90d"}, byName["tmend-prune.service"].exec)
	require.Equal(t, "scan", byName["tmend-scan.service"].exec[0])
	require.Equal(t, "serve", byName["tmend.service"].exec[0])

	// systemd's own checks, when the machine has systemd-analyze.
	path, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed; unit files checked by content only")
		return
	}
	for _, u := range units {
		if cal := u.get("Timer.OnCalendar"); cal != "" {
			out, err := exec.Command(path, "calendar", cal).CombinedOutput()
			require.NoError(t, err, "systemd-analyze calendar %q:\n%s", cal, out)
		}
	}
	// verify checks that ExecStart's binary exists: point the units at a real one.
	tmp := t.TempDir()
	bin := tmendBinary(t)
	var args []string
	for _, u := range units {
		b, err := os.ReadFile(u.path)
		require.NoError(t, err)
		b = bytes.ReplaceAll(b, []byte("/usr/local/bin/tmend"), []byte(bin))
		b = bytes.ReplaceAll(b, []byte("EnvironmentFile=/etc/tmend/tmend.env"), []byte("EnvironmentFile=-/etc/tmend/tmend.env"))
		dst := filepath.Join(tmp, filepath.Base(u.path))
		require.NoError(t, os.WriteFile(dst, b, 0o644))
		args = append(args, dst)
	}
	out, err := exec.Command(path, append([]string{"verify", "--man=no"}, args...)...).CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify:\n%s", out)
}

// envFile returns the variables tmend.env.example sets (not those commented out).
func envFile(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(systemdDir, "tmend.env.example"))
	require.NoError(t, err)
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

// envFileNames returns every TMEND_ variable tmend.env.example mentions, also commented out.
func envFileNames(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(systemdDir, "tmend.env.example"))
	require.NoError(t, err)
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^#?(TMEND_\w+)=`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	require.NotEmpty(t, out)
	return out
}

// shellWords splits a command line as systemd does for simple cases: spaces separate
// words, double quotes group them.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote, have = !inQuote, true
		case r == ' ' && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
