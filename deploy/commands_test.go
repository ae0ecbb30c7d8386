package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
)

// TestCommandLines runs every tmend command line of the manifests, the compose file, the
// Dockerfiles and the systemd units with --help, so an unknown command or option fails,
// and checks that every TMEND_ variable they set names an option of some command.
func TestCommandLines(t *testing.T) {
	t.Parallel()
	var commands [][]string
	var envs []string

	objs := loadKubernetes(t)
	for _, p := range podTemplates(objs) {
		for _, c := range p.tmpl.Spec.Containers {
			commands = append(commands, c.Args)
			for _, e := range c.Env {
				envs = append(envs, e.Name)
			}
		}
	}
	for _, cm := range objectsOf[corev1.ConfigMap](objs) {
		for k := range cm.Data {
			envs = append(envs, k)
		}
		// The memory limits hold only with the Go heap's soft limit under them.
		require.Contains(t, cm.Data, "GOMEMLIMIT")
	}

	composeCommands, composeEnvs := compose(t)
	commands = append(commands, composeCommands...)
	envs = append(envs, composeEnvs...)
	commands = append(commands, dockerfileCommands(t)...)
	for _, u := range loadUnits(t) {
		if u.exec != nil {
			commands = append(commands, u.exec)
		}
	}
	envs = append(envs, envFileNames(t)...)
	require.GreaterOrEqual(t, len(commands), 11)

	for _, args := range commands {
		code, out := tmend(t, nil, append(append([]string{}, args...), "--help")...)
		require.Equal(t, 0, code, "tmend %v: %s", args, out)
		require.Contains(t, out, "Usage:", "%v", args)
	}
	known := tmendCLI(t).envNames()
	require.NotEmpty(t, envs)
	for _, e := range envs {
		if strings.HasPrefix(e, "TMEND_") {
			require.True(t, known[e], "%s names no tmend option", e)
		}
	}
}

func compose(t *testing.T) ([][]string, []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "compose.yaml"))
	require.NoError(t, err)
	var c struct {
		Services map[string]struct {
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(b, &c))
	require.Contains(t, c.Services, "postgres")
	var commands [][]string
	var envs []string
	for _, name := range []string{"migrate", "tmend"} {
		s, ok := c.Services[name]
		require.True(t, ok, "compose service %s", name)
		commands = append(commands, s.Command)
		for k := range s.Environment {
			envs = append(envs, k)
		}
	}
	return commands, envs
}

// dockerfileCommands checks both Dockerfiles (from source, and GoReleaser's) and returns
// their CMD, which must be the same.
func dockerfileCommands(t *testing.T) [][]string {
	t.Helper()
	var cmds [][]string
	for _, name := range []string{"Dockerfile", "release.Dockerfile"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", name))
		require.NoError(t, err)
		s := string(b)
		require.Contains(t, s, "USER nonroot", name)
		require.Contains(t, s, `ENTRYPOINT ["/usr/local/bin/tmend"]`, name)
		require.Contains(t, s, "FROM gcr.io/distroless/static-debian12:nonroot", name)
		m := regexp.MustCompile(`(?m)^CMD (\[.*\])$`).FindStringSubmatch(s)
		require.NotNil(t, m, name)
		var cmd []string
		require.NoError(t, json.Unmarshal([]byte(m[1]), &cmd))
		cmds = append(cmds, cmd)
		if name == "Dockerfile" {
			require.GreaterOrEqual(t, strings.Count(s, "\nFROM "), 2, "multi-stage")
			require.Contains(t, s, "CGO_ENABLED=0")
			require.Contains(t, s, "-trimpath")
		} else {
			// GoReleaser's context holds the binaries it built, by platform.
			require.Contains(t, s, "COPY $TARGETPLATFORM/tmend /usr/local/bin/tmend")
		}
	}
	require.Equal(t, cmds[0], cmds[1], "both images start the same way")
	return cmds
}
