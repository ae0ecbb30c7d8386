package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const deployDir = "../../deploy"

type manifest struct {
	path string
	doc  map[string]any
}

func loadManifests(t *testing.T) []manifest {
	t.Helper()
	var out []manifest
	err := filepath.WalkDir(deployDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		dec := yaml.NewDecoder(f)
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return err
			}
			out = append(out, manifest{path, doc})
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// dig walks nested maps and slices: dig(doc, "spec", "template", 0, ...).
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			s, _ := v.([]any)
			if k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestDeployManifests(t *testing.T) {
	t.Parallel()
	kinds := map[string]int{}
	var commands [][]string
	var envs []string
	var podLabels, serviceSelector map[string]any
	var containerPorts []any
	for _, m := range loadManifests(t) {
		if filepath.Base(m.path) == "compose.yaml" {
			services := m.doc["services"].(map[string]any)
			require.Contains(t, services, "postgres")
			for _, name := range []string{"migrate", "tmend"} {
				commands = append(commands, strs(dig(services, name, "command")))
				for k := range dig(services, name, "environment").(map[string]any) {
					envs = append(envs, k)
				}
			}
			continue
		}
		kind, _ := m.doc["kind"].(string)
		kinds[kind]++
		var pod any
		switch kind {
		case "Deployment", "Job":
			pod = dig(m.doc, "spec", "template", "spec")
		case "CronJob":
			pod = dig(m.doc, "spec", "jobTemplate", "spec", "template", "spec")
		case "ConfigMap":
			for k := range m.doc["data"].(map[string]any) {
				envs = append(envs, k)
			}
		}
		// (These kinds have no pod: check them before moving on.)
		if kind == "Service" {
			ann := dig(m.doc, "metadata", "annotations").(map[string]any)
			require.Equal(t, "true", ann["prometheus.io/scrape"])
			require.Equal(t, "/metrics", ann["prometheus.io/path"])
			serviceSelector = dig(m.doc, "spec", "selector").(map[string]any)
		}
		if kind == "Kustomization" && filepath.Base(filepath.Dir(m.path)) == "daemon" {
			require.Contains(t, strs(m.doc["resources"]), "networkpolicy.yaml", "the daemon variant applies its NetworkPolicy")
		}
		if pod == nil {
			continue
		}
		require.Equal(t, true, dig(pod, "securityContext", "runAsNonRoot"), m.path)
		for _, c := range dig(pod, "containers").([]any) {
			args := strs(dig(c, "args"))
			commands = append(commands, args)
			require.Equal(t, true, dig(c, "securityContext", "readOnlyRootFilesystem"), m.path)
			require.Equal(t, false, dig(c, "securityContext", "allowPrivilegeEscalation"), m.path)
			require.NotNil(t, dig(c, "resources", "requests"), m.path)
			require.NotNil(t, dig(c, "resources", "limits", "memory"), m.path)
			for _, e := range dig(c, "env").([]any) {
				envs = append(envs, dig(e, "name").(string))
				if ref := dig(e, "valueFrom", "secretKeyRef"); ref != nil {
					require.Equal(t, "tmend", dig(ref, "name"), "secrets come from the Secret named in the README")
				} else {
					t.Errorf("%s: env %v is set in the manifest; secrets belong in the Secret", m.path, dig(e, "name"))
				}
			}
			if kind == "Deployment" {
				podLabels = dig(m.doc, "spec", "template", "metadata", "labels").(map[string]any)
				containerPorts = dig(c, "ports").([]any)
				require.Equal(t, "/readyz", dig(c, "readinessProbe", "httpGet", "path"))
				require.Equal(t, "/healthz", dig(c, "livenessProbe", "httpGet", "path"))
				grace := time.Duration(dig(pod, "terminationGracePeriodSeconds").(int)) * time.Second
				require.Greater(t, grace, flagDuration(t, args, "--shutdown-timeout"), "grace period must outlast the shutdown timeout")
			}
		}
	}
	require.Equal(t, map[string]int{"Kustomization": 3, "ConfigMap": 1, "Job": 1, "Deployment": 1, "Service": 1, "CronJob": 1,
		"NetworkPolicy": 1}, kinds)
	require.Equal(t, podLabels, serviceSelector, "the Service selects the daemon's pods")
	checkNetworkPolicy(t, podLabels, containerPorts)

	commands = append(commands, dockerfileCommands(t)...)
	units, unitEnvs := systemdCommands(t)
	commands = append(commands, units...)
	envs = append(envs, unitEnvs...)
	require.GreaterOrEqual(t, len(commands), 8)
	checkCommandLines(t, commands)
	checkEnvNames(t, envs)
}

func flagDuration(t *testing.T, args []string, name string) time.Duration {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			d, err := time.ParseDuration(args[i+1])
			require.NoError(t, err)
			return d
		}
	}
	t.Fatalf("%s not in %v", name, args)
	return 0
}

// checkCommandLines runs each command line with --help: unknown commands or flags fail.
func checkCommandLines(t *testing.T, commands [][]string) {
	t.Helper()
	for _, args := range commands {
		r := runCLI(t, "", nil, append(args, "--help")...)
		require.Equal(t, exitOK, r.code, "tmend %v: %s", args, r.stderr)
		require.Contains(t, r.stdout, "Usage:", "%v", args)
	}
}

// checkEnvNames requires every TMEND_ variable to name an option of some command.
func checkEnvNames(t *testing.T, envs []string) {
	t.Helper()
	known := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { known[envName(f.Name)] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { known[envName(f.Name)] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(&env{getenv: os.Getenv}))
	require.NotEmpty(t, envs)
	for _, e := range envs {
		if strings.HasPrefix(e, "TMEND_") {
			require.True(t, known[e], "%s names no tmend option", e)
		}
	}
	// The memory limits hold only with the Go heap's soft limit under them.
	require.Contains(t, envs, "GOMEMLIMIT")
}

func dockerfileCommands(t *testing.T) [][]string {
	b, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	require.NoError(t, err)
	s := string(b)
	require.GreaterOrEqual(t, strings.Count(s, "\nFROM "), 2, "multi-stage")
	require.Contains(t, s, "CGO_ENABLED=0")
	require.Contains(t, s, "-X main.version=")
	require.Contains(t, s, "USER nonroot")
	m := regexp.MustCompile(`(?m)^CMD (\[.*\])$`).FindStringSubmatch(s)
	require.NotNil(t, m)
	var cmd []string
	require.NoError(t, json.Unmarshal([]byte(m[1]), &cmd))
	return [][]string{cmd}
}

// systemdCommands returns the ExecStart command lines of the units (without the binary)
// and the variable names of the environment file; it also runs systemd-analyze verify
// when the machine has it.
func systemdCommands(t *testing.T) ([][]string, []string) {
	dir := filepath.Join(deployDir, "systemd")
	units, err := filepath.Glob(filepath.Join(dir, "*.service"))
	require.NoError(t, err)
	require.Len(t, units, 2)
	var cmds [][]string
	for _, u := range units {
		b, err := os.ReadFile(u)
		require.NoError(t, err)
		s := string(b)
		for _, opt := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "DynamicUser=yes", "EnvironmentFile=/etc/tmend/tmend.env",
			"Environment=GOMEMLIMIT=", "MemoryMax="} {
			require.Contains(t, s, opt, u)
		}
		m := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/tmend (.*)$`).FindStringSubmatch(s)
		require.NotNil(t, m, u)
		cmds = append(cmds, shellWords(m[1]))
	}
	var envs []string
	b, err := os.ReadFile(filepath.Join(dir, "tmend.env.example"))
	require.NoError(t, err)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "#")
		if k, _, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "TMEND_") {
			envs = append(envs, k)
		}
	}
	if path, err := exec.LookPath("systemd-analyze"); err == nil {
		// Point the units at a real binary, as verify checks that it exists.
		tmp := t.TempDir()
		bin := tmendBinary(t)
		files, _ := filepath.Glob(filepath.Join(dir, "tmend*.*"))
		var args []string
		for _, f := range files {
			if strings.HasSuffix(f, ".example") {
				continue
			}
			b, _ := os.ReadFile(f)
			b = bytes.ReplaceAll(b, []byte("/usr/local/bin/tmend"), []byte(bin))
			b = bytes.ReplaceAll(b, []byte("EnvironmentFile=/etc/tmend/tmend.env"), []byte("EnvironmentFile=-/etc/tmend/tmend.env"))
			dst := filepath.Join(tmp, filepath.Base(f))
			require.NoError(t, os.WriteFile(dst, b, 0o644))
			args = append(args, dst)
		}
		out, err := exec.Command(path, append([]string{"verify", "--man=no"}, args...)...).CombinedOutput()
		require.NoError(t, err, "systemd-analyze verify:\n%s", out)
	} else {
		t.Log("systemd-analyze is not installed; unit files checked by content only")
	}
	return cmds, envs
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

// networkPolicy mirrors networking.k8s.io/v1 NetworkPolicy, so that decoding with known
// fields only catches a misspelt or misplaced field, which the API server would reject
// or, worse, silently drop (an ingress rule without its "from" admits everyone).
type networkPolicy struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name        string            `yaml:"name"`
		Namespace   string            `yaml:"namespace"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		PodSelector labelSelector `yaml:"podSelector"`
		PolicyTypes []string      `yaml:"policyTypes"`
		Ingress     []struct {
			From  []policyPeer `yaml:"from"`
			Ports []policyPort `yaml:"ports"`
		} `yaml:"ingress"`
		Egress []struct {
			To    []policyPeer `yaml:"to"`
			Ports []policyPort `yaml:"ports"`
		} `yaml:"egress"`
	} `yaml:"spec"`
}

type labelSelector struct {
	MatchLabels      map[string]string `yaml:"matchLabels"`
	MatchExpressions []struct {
		Key      string   `yaml:"key"`
		Operator string   `yaml:"operator"`
		Values   []string `yaml:"values"`
	} `yaml:"matchExpressions"`
}

type policyPeer struct {
	PodSelector       *labelSelector `yaml:"podSelector"`
	NamespaceSelector *labelSelector `yaml:"namespaceSelector"`
	IPBlock           *struct {
		CIDR   string   `yaml:"cidr"`
		Except []string `yaml:"except"`
	} `yaml:"ipBlock"`
}

type policyPort struct {
	Protocol string    `yaml:"protocol"`
	Port     yaml.Node `yaml:"port"` // a number or a port name
	EndPort  *int      `yaml:"endPort"`
}

// checkNetworkPolicy decodes the daemon's NetworkPolicy strictly and checks that it
// selects the daemon's pods and admits, on the daemon's port only, named peers only.
func checkNetworkPolicy(t *testing.T, podLabels map[string]any, containerPorts []any) {
	t.Helper()
	path := filepath.Join(deployDir, "kubernetes", "daemon", "networkpolicy.yaml")
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var np networkPolicy
	require.NoError(t, dec.Decode(&np), path)
	var extra networkPolicy
	require.ErrorIs(t, dec.Decode(&extra), io.EOF, "one object per file")

	require.Equal(t, "networking.k8s.io/v1", np.APIVersion)
	require.Equal(t, "NetworkPolicy", np.Kind)
	require.NotEmpty(t, np.Metadata.Name)
	want := map[string]string{}
	for k, v := range podLabels {
		want[k] = v.(string)
	}
	require.Equal(t, want, np.Spec.PodSelector.MatchLabels, "selects the daemon's pods")
	require.Empty(t, np.Spec.PodSelector.MatchExpressions)
	require.Contains(t, np.Spec.PolicyTypes, "Ingress")
	for _, pt := range np.Spec.PolicyTypes {
		require.Contains(t, []string{"Ingress", "Egress"}, pt)
	}
	if slices.Contains(np.Spec.PolicyTypes, "Egress") {
		require.NotEmpty(t, np.Spec.Egress, "egress without rules would cut off the database")
	}

	names, numbers := map[string]bool{}, map[int]bool{}
	for _, p := range containerPorts {
		if n, ok := dig(p, "name").(string); ok {
			names[n] = true
		}
		numbers[dig(p, "containerPort").(int)] = true
	}
	require.NotEmpty(t, np.Spec.Ingress)
	for _, rule := range np.Spec.Ingress {
		require.NotEmpty(t, rule.From, "an ingress rule without from admits every peer")
		require.NotEmpty(t, rule.Ports, "an ingress rule without ports admits every port")
		for _, peer := range rule.From {
			require.Nil(t, peer.IPBlock, "peers are chosen by label, not address")
			require.True(t, peer.PodSelector != nil || peer.NamespaceSelector != nil)
			for _, sel := range []*labelSelector{peer.PodSelector, peer.NamespaceSelector} {
				if sel != nil {
					require.True(t, len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0, "an empty selector matches everything")
				}
			}
		}
		for _, p := range rule.Ports {
			require.Equal(t, "TCP", p.Protocol)
			require.Nil(t, p.EndPort)
			if n, err := strconv.Atoi(p.Port.Value); err == nil {
				require.True(t, numbers[n], "port %d is not the daemon's", n)
			} else {
				require.True(t, names[p.Port.Value], "port %q is not the daemon's", p.Port.Value)
			}
		}
	}
	for _, rule := range np.Spec.Egress {
		for _, p := range rule.Ports {
			require.Contains(t, []string{"TCP", "UDP", "SCTP"}, p.Protocol)
			require.NotEmpty(t, p.Port.Value)
		}
	}
}
