package deploy

import (
	"bytes"
	"errors"
	"fmt"
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

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsyaml "sigs.k8s.io/yaml"
)

var kubernetesDir = filepath.Join(repoRoot, "deploy", "kubernetes")

// The label every object carries and every selector selects on; the component label
// tells tmend's pods apart.
const (
	nameLabel      = "app.kubernetes.io/name"
	componentLabel = "app.kubernetes.io/component"
)

// kustomization mirrors the fields of kustomize.config.k8s.io/v1beta1 Kustomization
// these manifests may use; anything else fails the strict decoding.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Namespace  string   `json:"namespace,omitempty"`
}

// object is one YAML document of the manifests, decoded strictly into its API type.
type object struct {
	path string
	meta metav1.TypeMeta
	obj  any // *appsv1.Deployment, *batchv1.Job, ...
}

func (o object) String() string { return o.path + ": " + o.meta.Kind }

// newTyped returns an empty value of the API type for an apiVersion and kind, or nil.
func newTyped(tm metav1.TypeMeta) any {
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Service":
		return &corev1.Service{}
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "batch/v1 Job":
		return &batchv1.Job{}
	case "batch/v1 CronJob":
		return &batchv1.CronJob{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &monitoringv1.PrometheusRule{}
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		return &kustomization{}
	}
	return nil
}

// loadKubernetes decodes every document of every YAML file under deploy/kubernetes
// strictly: an unknown or misplaced field, a wrong type or a duplicate key fails, as
// does a kind the test does not know.
func loadKubernetes(t *testing.T) []object {
	t.Helper()
	var out []object
	err := filepath.WalkDir(kubernetesDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, doc := range splitYAML(t, b) {
			var tm metav1.TypeMeta
			require.NoError(t, sigsyaml.Unmarshal(doc, &tm), "%s #%d", path, i)
			typed := newTyped(tm)
			require.NotNil(t, typed, "%s #%d: %s %s is not a kind this test checks", path, i, tm.APIVersion, tm.Kind)
			require.NoError(t, sigsyaml.UnmarshalStrict(doc, typed), "%s #%d", path, i)
			out = append(out, object{path: path, meta: tm, obj: typed})
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// splitYAML returns the documents of a YAML stream.
func splitYAML(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var docs [][]byte
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs
		}
		require.NoError(t, err)
		doc, err := yaml.Marshal(&n)
		require.NoError(t, err)
		docs = append(docs, doc)
	}
}

func objectsOf[T any](objs []object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.obj.(*T); ok {
			out = append(out, *v)
		}
	}
	return out
}

// podTemplate is a workload's pod template, named for messages.
type podTemplate struct {
	owner string
	tmpl  corev1.PodTemplateSpec
}

func podTemplates(objs []object) []podTemplate {
	var out []podTemplate
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			out = append(out, podTemplate{"Deployment " + v.Name, v.Spec.Template})
		case *batchv1.Job:
			out = append(out, podTemplate{"Job " + v.Name, v.Spec.Template})
		case *batchv1.CronJob:
			out = append(out, podTemplate{"CronJob " + v.Name, v.Spec.JobTemplate.Spec.Template})
		}
	}
	return out
}

// selects returns the pod templates a selector matches.
func selects(t *testing.T, sel *metav1.LabelSelector, pods []podTemplate) []string {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	require.NoError(t, err)
	var out []string
	for _, p := range pods {
		if !s.Empty() && s.Matches(labels.Set(p.tmpl.Labels)) {
			out = append(out, p.owner)
		}
	}
	return out
}

// imageTag is the pinned form: a registry path and a release tag vX.Y.Z.
var imageTag = regexp.MustCompile(`^ghcr\.io/tmend/tmend:(v\d+\.\d+\.\d+)$`)

func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	objs := loadKubernetes(t)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.meta.Kind]++
	}
	require.Equal(t, map[string]int{"Kustomization": 4, "ConfigMap": 1, "Job": 1, "Deployment": 1, "Service": 1, "CronJob": 2,
		"NetworkPolicy": 1, "PodDisruptionBudget": 1, "ServiceMonitor": 1, "PrometheusRule": 1}, kinds)

	deployments := objectsOf[appsv1.Deployment](objs)
	require.Len(t, deployments, 1)
	daemon := deployments[0]
	pods := podTemplates(objs)

	t.Run("EveryObjectIsLabelled", func(t *testing.T) {
		t.Parallel()
		for _, o := range objs {
			if m, ok := o.obj.(metav1.Object); ok {
				require.Equal(t, "tmend", m.GetLabels()[nameLabel], "%s: label %s", o, nameLabel)
				require.Empty(t, validation.IsDNS1123Subdomain(m.GetName()), "%s: name %q", o, m.GetName())
			}
		}
	})

	t.Run("PodTemplatesAndSelectors", func(t *testing.T) {
		t.Parallel()
		seen := map[string]string{}
		for _, p := range pods {
			require.Equal(t, "tmend", p.tmpl.Labels[nameLabel], "%s: pod label %s", p.owner, nameLabel)
			c := p.tmpl.Labels[componentLabel]
			require.NotEmpty(t, c, "%s: pod label %s", p.owner, componentLabel)
			require.Empty(t, seen[c], "%s and %s share the component %q, so selectors cannot tell them apart", p.owner, seen[c], c)
			seen[c] = p.owner
		}
		// The Deployment, the Service, the PDB and the NetworkPolicy select the daemon's
		// pods and no others; their selectors name the app and the component.
		sel := daemon.Spec.Selector
		require.NotNil(t, sel)
		require.Empty(t, sel.MatchExpressions)
		require.Equal(t, daemon.Spec.Template.Labels, sel.MatchLabels, "the Deployment's selector is its pod template's labels")
		for _, tt := range []struct {
			what string
			sel  *metav1.LabelSelector
		}{
			{"Deployment", sel},
			{"Service", &metav1.LabelSelector{MatchLabels: objectsOf[corev1.Service](objs)[0].Spec.Selector}},
			{"PodDisruptionBudget", objectsOf[policyv1.PodDisruptionBudget](objs)[0].Spec.Selector},
			{"NetworkPolicy", &objectsOf[networkingv1.NetworkPolicy](objs)[0].Spec.PodSelector},
		} {
			require.Equal(t, "tmend", tt.sel.MatchLabels[nameLabel], "%s selector", tt.what)
			require.NotEmpty(t, tt.sel.MatchLabels[componentLabel], "%s selector", tt.what)
			require.Equal(t, []string{"Deployment " + daemon.Name}, selects(t, tt.sel, pods), "%s selects the daemon's pods only", tt.what)
		}
		for _, j := range objectsOf[batchv1.Job](objs) {
			require.Nil(t, j.Spec.Selector, "Job %s: let Kubernetes generate the selector", j.Name)
		}
		for _, cj := range objectsOf[batchv1.CronJob](objs) {
			require.Equal(t, cj.Spec.JobTemplate.Spec.Template.Labels, cj.Spec.JobTemplate.Labels, "CronJob %s: its Jobs carry its pods' labels", cj.Name)
		}
	})

	t.Run("PodsAreLockedDown", func(t *testing.T) {
		t.Parallel()
		for _, p := range pods {
			spec := p.tmpl.Spec
			require.NotNil(t, spec.SecurityContext, p.owner)
			require.Equal(t, ptrTo(true), spec.SecurityContext.RunAsNonRoot, p.owner)
			require.Len(t, spec.Containers, 1, p.owner)
			for _, c := range spec.Containers {
				sc := c.SecurityContext
				require.NotNil(t, sc, p.owner)
				require.Equal(t, ptrTo(true), sc.ReadOnlyRootFilesystem, p.owner)
				require.Equal(t, ptrTo(false), sc.AllowPrivilegeEscalation, p.owner)
				require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, p.owner)
				require.NotEmpty(t, c.Resources.Requests, p.owner)
				require.False(t, c.Resources.Limits.Memory().IsZero(), "%s: limits.memory", p.owner)
				for _, e := range c.Env {
					require.Empty(t, e.Value, "%s: env %s is set in the manifest; secrets belong in the Secret", p.owner, e.Name)
					require.NotNil(t, e.ValueFrom, p.owner)
					require.NotNil(t, e.ValueFrom.SecretKeyRef, "%s: env %s", p.owner, e.Name)
					require.Equal(t, "tmend", e.ValueFrom.SecretKeyRef.Name, "%s: secrets come from the Secret named in the runbook", p.owner)
				}
				for _, ef := range c.EnvFrom {
					require.NotNil(t, ef.ConfigMapRef, p.owner)
					require.Equal(t, "tmend", ef.ConfigMapRef.Name, p.owner)
				}
			}
		}
	})

	// One release, pinned: every container runs the same vX.Y.Z image, never a floating tag.
	t.Run("ImagesArePinned", func(t *testing.T) {
		t.Parallel()
		tag := ""
		for _, p := range pods {
			for _, c := range p.tmpl.Spec.Containers {
				m := imageTag.FindStringSubmatch(c.Image)
				require.NotNil(t, m, "%s: image %q is not pinned to a release tag", p.owner, c.Image)
				if tag == "" {
					tag = m[1]
				}
				require.Equal(t, tag, m[1], "%s: every manifest runs the same release", p.owner)
				require.Equal(t, corev1.PullPolicy(""), c.ImagePullPolicy, "%s: IfNotPresent, the default for a pinned tag", p.owner)
			}
		}
	})

	t.Run("MigrationJobIsNamedAfterItsRelease", func(t *testing.T) {
		t.Parallel()
		jobs := objectsOf[batchv1.Job](objs)
		require.Len(t, jobs, 1)
		j := jobs[0]
		m := imageTag.FindStringSubmatch(j.Spec.Template.Spec.Containers[0].Image)
		require.NotNil(t, m)
		// A Job's pod template is immutable: a new image under the same name would fail
		// to apply. Named after the release, an upgrade creates a new Job.
		require.Equal(t, "tmend-migrate-"+m[1], j.Name)
		// Kubernetes labels the Job's pods with its name, so it must be a valid label value.
		require.Empty(t, validation.IsValidLabelValue(j.Name))
		require.Equal(t, []string{"migrate", "up"}, j.Spec.Template.Spec.Containers[0].Args)
		require.Equal(t, corev1.RestartPolicyNever, j.Spec.Template.Spec.RestartPolicy)
		require.NotNil(t, j.Spec.TTLSecondsAfterFinished, "finished Jobs are cleaned up")
		require.Equal(t, "migrate", j.Spec.Template.Labels[componentLabel])
	})

	t.Run("Daemon", func(t *testing.T) {
		t.Parallel()
		spec := daemon.Spec.Template.Spec
		c := spec.Containers[0]
		require.Equal(t, "serve", c.Args[0])
		require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
		require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
		require.NotNil(t, spec.TerminationGracePeriodSeconds)
		grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
		require.Greater(t, grace, flagDuration(t, c.Args, "--shutdown-timeout"), "the grace period must outlast the shutdown timeout")
		require.NotEmpty(t, flagValue(c.Args, "--prune-schedule"), "the daemon prunes on its own schedule")

		svc := objectsOf[corev1.Service](objs)[0]
		require.Equal(t, "true", svc.Annotations["prometheus.io/scrape"])
		require.Equal(t, "/metrics", svc.Annotations["prometheus.io/path"])
		require.Len(t, svc.Spec.Ports, 1)
		require.Equal(t, intstr.FromString("http"), svc.Spec.Ports[0].TargetPort)
		require.Equal(t, "http", c.Ports[0].Name)
	})

	t.Run("PodDisruptionBudget", func(t *testing.T) {
		t.Parallel()
		pdb := objectsOf[policyv1.PodDisruptionBudget](objs)[0]
		require.NotNil(t, daemon.Spec.Replicas)
		replicas := int(*daemon.Spec.Replicas)
		require.GreaterOrEqual(t, replicas, 2, "one pod stays up while another is evicted")
		// It must let a drain evict a pod, at this replica count and at one.
		for _, n := range []int{replicas, 1} {
			allowed := 0
			switch {
			case pdb.Spec.MaxUnavailable != nil:
				v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, n, false)
				require.NoError(t, err)
				allowed = v
			case pdb.Spec.MinAvailable != nil:
				v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, n, true)
				require.NoError(t, err)
				allowed = n - v
			}
			require.GreaterOrEqual(t, allowed, 1, "at %d replicas the PDB allows no eviction: drains would hang", n)
			require.Less(t, allowed, max(n, 2), "at %d replicas the PDB lets every pod go at once", n)
		}
	})

	t.Run("CronJobs", func(t *testing.T) {
		t.Parallel()
		byComponent := map[string]batchv1.CronJob{}
		for _, cj := range objectsOf[batchv1.CronJob](objs) {
			byComponent[cj.Spec.JobTemplate.Spec.Template.Labels[componentLabel]] = cj
			require.LessOrEqual(t, len(cj.Name), 52, "CronJob names are at most 52 characters")
			_, err := cron.ParseStandard(cj.Spec.Schedule)
			require.NoError(t, err, cj.Name)
			require.NotNil(t, cj.Spec.TimeZone, cj.Name)
			require.Equal(t, batchv1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy, cj.Name)
			require.Equal(t, corev1.RestartPolicyNever, cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy, cj.Name)
		}
		require.Equal(t, "scan", byComponent["scan"].Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args[0])
		prune := byComponent["prune"].Spec.JobTemplate.Spec.Template.Spec.Containers[0]
		require.Equal(t, []string{"prune", "--older-than", "90d"}, prune.Args)
		// The CronJob variant prunes what the daemon variant prunes.
		require.Equal(t, flagValue(daemon.Spec.Template.Spec.Containers[0].Args, "--prune-older-than"), prune.Args[2])
	})

	t.Run("NetworkPolicy", func(t *testing.T) {
		t.Parallel()
		checkNetworkPolicy(t, objectsOf[networkingv1.NetworkPolicy](objs)[0], daemon.Spec.Template.Spec.Containers[0].Ports)
	})

	t.Run("Kustomizations", func(t *testing.T) {
		t.Parallel()
		listed := map[string]int{}
		for _, o := range objs {
			k, ok := o.obj.(*kustomization)
			if !ok {
				continue
			}
			dir := filepath.Dir(o.path)
			require.Empty(t, k.Namespace, "%s: the namespace is the operator's choice (kubectl -n)", o.path)
			for _, r := range k.Resources {
				p := filepath.Join(dir, r)
				st, err := os.Stat(p)
				require.NoError(t, err, "%s lists %s", o.path, r)
				if st.IsDir() {
					_, err := os.Stat(filepath.Join(p, "kustomization.yaml"))
					require.NoError(t, err, "%s lists %s", o.path, r)
					continue
				}
				listed[p]++
			}
		}
		// Every manifest is applied by exactly one kustomization.
		for _, o := range objs {
			if _, ok := o.obj.(*kustomization); !ok {
				require.Equal(t, 1, listed[o.path], "%s is listed by %d kustomizations", o.path, listed[o.path])
			}
		}
		// kubectl's kustomize builds each one, when the machine has kubectl.
		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			t.Log("kubectl is not installed; kustomizations checked by content only")
			return
		}
		for _, o := range objs {
			if _, ok := o.obj.(*kustomization); ok {
				out, err := exec.Command(kubectl, "kustomize", filepath.Dir(o.path)).CombinedOutput()
				require.NoError(t, err, "kubectl kustomize %s:\n%s", filepath.Dir(o.path), out)
			}
		}
	})

	t.Run("MemoryFitsTheLimits", func(t *testing.T) {
		t.Parallel()
		cm := objectsOf[corev1.ConfigMap](objs)[0]
		cli := tmendCLI(t)
		for _, p := range pods {
			c := p.tmpl.Spec.Containers[0]
			if len(c.EnvFrom) == 0 {
				continue // the migration Job reads no sessions and sets no GOMEMLIMIT
			}
			limit := c.Resources.Limits.Memory().Value()
			soft := parseGoMemLimit(t, cm.Data["GOMEMLIMIT"])
			settings := func(name string) string {
				if v, ok := cm.Data["TMEND_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))]; ok {
					return v
				}
				return cli.flagDefault(t, "scan", name)
			}
			checkMemory(t, p.owner, limit, soft, c.Args[0], settings)
		}
	})
}

// The memory a run needs (deploy/README.md, "Memory"): its live heap is about 20 MiB plus
// 10 times the larger of --max-inflight-bytes and the largest session it repairs (at most
// --max-bytes): the session's content, its repaired copy, and the engine's working set,
// which it keeps under 8 times the content (a session that would need more is refused as
// too_large; measured 8 times with a million tool blocks, 5 to 6 with sessions of
// --messages 60000 from tmend gen). Without a soft limit the Go GC lets the heap grow to
// about twice the live heap. So GOMEMLIMIT must hold the live heap, and the hard limit
// must leave room above GOMEMLIMIT (measured: 241 MiB RSS at GOMEMLIMIT=200MiB, the worst
// case found for the 256Mi limit).
const (
	memBase       = 20 << 20
	memPerByte    = 10
	memLimitSlack = 1.25
)

// checkMemory checks one container's or unit's limits: hard the hard limit in bytes,
// soft GOMEMLIMIT in bytes, command the tmend command it runs, setting its options.
func checkMemory(t *testing.T, owner string, hard, soft int64, command string, setting func(string) string) {
	t.Helper()
	require.Positive(t, soft, "%s: GOMEMLIMIT", owner)
	require.GreaterOrEqual(t, float64(hard), memLimitSlack*float64(soft), "%s: the hard limit leaves no room above GOMEMLIMIT", owner)
	if command != "scan" && command != "serve" {
		return // prune and migrate hold no session content
	}
	atoi := func(name string) int64 {
		v, err := strconv.ParseInt(setting(name), 10, 64)
		require.NoError(t, err, "%s: %s", owner, name)
		return v
	}
	inflight, maxBytes := atoi("max-inflight-bytes"), atoi("max-bytes")
	need := memBase + memPerByte*max(inflight, maxBytes)
	require.LessOrEqual(t, need, soft, "%s: with --max-inflight-bytes %d and --max-bytes %d a run needs about %d MiB; GOMEMLIMIT is %d MiB",
		owner, inflight, maxBytes, need>>20, soft>>20)
}

// parseGoMemLimit parses GOMEMLIMIT's syntax: a number with an optional B, KiB, MiB, GiB
// or TiB suffix.
func parseGoMemLimit(t *testing.T, s string) int64 {
	t.Helper()
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			require.NoError(t, err, "GOMEMLIMIT %q", s)
			return v << u.shift
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "GOMEMLIMIT %q", s)
	return v
}

// checkNetworkPolicy checks that the daemon's NetworkPolicy admits, on the daemon's port
// only, named peers only, and lets it reach what it needs.
func checkNetworkPolicy(t *testing.T, np networkingv1.NetworkPolicy, containerPorts []corev1.ContainerPort) {
	t.Helper()
	require.Contains(t, np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
	if slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		require.NotEmpty(t, np.Spec.Egress, "egress without rules would cut off the database")
	}
	names, numbers := map[string]bool{}, map[int]bool{}
	for _, p := range containerPorts {
		names[p.Name] = true
		numbers[int(p.ContainerPort)] = true
	}
	require.NotEmpty(t, np.Spec.Ingress)
	for _, rule := range np.Spec.Ingress {
		require.NotEmpty(t, rule.From, "an ingress rule without from admits every peer")
		require.NotEmpty(t, rule.Ports, "an ingress rule without ports admits every port")
		for _, peer := range rule.From {
			require.Nil(t, peer.IPBlock, "peers are chosen by label, not address")
			require.True(t, peer.PodSelector != nil || peer.NamespaceSelector != nil)
			for _, sel := range []*metav1.LabelSelector{peer.PodSelector, peer.NamespaceSelector} {
				if sel != nil {
					require.True(t, len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0, "an empty selector matches everything")
				}
			}
		}
		for _, p := range rule.Ports {
			require.NotNil(t, p.Protocol)
			require.Equal(t, corev1.ProtocolTCP, *p.Protocol)
			require.Nil(t, p.EndPort)
			require.NotNil(t, p.Port)
			if p.Port.Type == intstr.Int {
				require.True(t, numbers[p.Port.IntValue()], "port %d is not the daemon's", p.Port.IntValue())
			} else {
				require.True(t, names[p.Port.StrVal], "port %q is not the daemon's", p.Port.StrVal)
			}
		}
	}
	for _, rule := range np.Spec.Egress {
		for _, p := range rule.Ports {
			require.NotNil(t, p.Port)
		}
	}
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func flagDuration(t *testing.T, args []string, name string) time.Duration {
	t.Helper()
	v := flagValue(args, name)
	require.NotEmpty(t, v, "%s not in %v", name, args)
	d, err := time.ParseDuration(v)
	require.NoError(t, err)
	return d
}

func ptrTo[T any](v T) *T { return &v }

// memoryQuantity parses a systemd MemoryMax= or Kubernetes quantity into bytes.
func memoryQuantity(t *testing.T, s string) int64 {
	t.Helper()
	// systemd: K, M, G, T are powers of 1024.
	if n, ok := strings.CutSuffix(s, "M"); ok {
		v, err := strconv.ParseInt(n, 10, 64)
		require.NoError(t, err)
		return v << 20
	}
	if n, ok := strings.CutSuffix(s, "G"); ok {
		v, err := strconv.ParseInt(n, 10, 64)
		require.NoError(t, err)
		return v << 30
	}
	q, err := resource.ParseQuantity(s)
	require.NoError(t, err, fmt.Sprintf("memory %q", s))
	return q.Value()
}
