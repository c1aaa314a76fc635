package envoy

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/test/golden"
)

// capgate as a sidecar of a workload it did not write: envoy/sidecar holds a
// chart of the user's own (helm/my-agent) that adds capgate through the named
// templates of capgate's chart, and a kustomize component that patches an
// existing Deployment and Service. Each is rendered here, every object
// decoded strictly into its Kubernetes type, and the resulting pod put
// through the checks of the chart's own pod.

const (
	sidecarChartDir     = "sidecar/helm/my-agent"
	sidecarRelease      = "my-agent"
	sidecarKustomizeDir = "sidecar/kustomize"
)

// sidecarManifest is the one capability of the my-agent examples.
func sidecarManifest(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sidecarKustomizeDir, "my-agent", "manifests", "answer.yaml"))
	require.NoError(t, err)
	return string(b)
}

// TestSidecarHelmLibrary renders my-agent's chart with capgate's chart as its
// dependency (as `helm dependency update` vendors it): my-agent's own
// Deployment and Service, with capgate's containers, volumes and Service port
// included, and capgate's ConfigMaps, Secret and NetworkPolicy for my-agent's
// pods; no Deployment or Service of capgate's own.
func TestSidecarHelmLibrary(t *testing.T) {
	parent, err := loader.Load(sidecarChartDir)
	require.NoError(t, err)
	require.Len(t, parent.Metadata.Dependencies, 1)
	sub, err := loader.Load(chartDir)
	require.NoError(t, err)
	require.Equal(t, parent.Metadata.Dependencies[0].Version, sub.Metadata.Version, "my-agent depends on this chart's version")
	parent.AddDependency(sub)

	vals := map[string]any{"capgate": map[string]any{"manifests": map[string]any{"files": map[string]any{"answer": sidecarManifest(t)}}}}
	rv, err := util.ToRenderValues(parent, vals, common.ReleaseOptions{Name: sidecarRelease, Namespace: sidecarRelease, IsInstall: true}, common.DefaultCapabilities)
	require.NoError(t, err)
	files, err := engine.Engine{Strict: true}.RenderWithContext(t.Context(), parent, rv)
	require.NoError(t, err)
	var docs []obj
	for name, content := range files {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt
		}
		for doc, text := range releaseutil.SplitManifests(content) {
			decodeStrict(t, name+"/"+doc, []byte(text))
		}
		docs = append(docs, parseDocs(t, name, []byte(content))...)
	}
	k := objectSet(t, docs)

	var kinds []string
	for key := range k.objects {
		kinds = append(kinds, key)
	}
	require.ElementsMatch(t, []string{
		"Deployment/my-agent", "Service/my-agent", // my-agent's own
		"ConfigMap/my-agent-config", "ConfigMap/my-agent-manifests", "ConfigMap/my-agent-envoy-bootstrap",
		"Secret/my-agent-admin-token", "NetworkPolicy/my-agent", // capgate's, for my-agent's pods
	}, kinds)
	checkSidecarPod(t, k, sidecarRelease, "my-agent")
}

// checkSidecarPod checks the pod of a workload capgate joined: the checks of
// the chart's own pod, capgate's config loaded by its loader, the Service
// sending traffic to Envoy only, and the NetworkPolicy admitting Envoy's port
// (not the agent's) to the workload's pods.
func checkSidecarPod(t *testing.T, k *kustomization, name, agent string) {
	t.Helper()
	checkReferences(t, k, name)
	checkEnvoyPod(t, k, name)
	loadRenderedConfig(t, k, name, true)

	dep := k.object(t, "Deployment/"+name)
	var names []string
	for _, c := range list(dep, "spec", "template", "spec", "containers") {
		names = append(names, str(c, "name"))
	}
	require.ElementsMatch(t, []string{agent, "envoy", "capgate"}, names, "the workload's container and capgate's")
	envoyC := container(t, dep, "envoy")
	agentC := container(t, dep, agent)
	svc := k.object(t, "Service/"+name)
	require.Len(t, list(svc, "spec", "ports"), 1)
	require.Equal(t, "a2a", str(svc, "spec", "ports", 0, "targetPort"), "the Service targets Envoy")
	envoyPort := containerPort(t, envoyC, "a2a")
	require.Equal(t, int64(65532), int64(num(dep, "spec", "template", "spec", "securityContext", "fsGroup")))
	np, ok := k.objects["NetworkPolicy/"+name]
	if !ok {
		return // kustomize: the workload's own NetworkPolicy, if any, is the overlay's
	}
	require.Equal(t, at(dep, "spec", "template", "metadata", "labels"), at(np, "spec", "podSelector", "matchLabels"), "the NetworkPolicy selects the workload's pods")
	var admitted []int
	for _, rule := range list(np, "spec", "ingress") {
		for _, p := range list(rule, "ports") {
			admitted = append(admitted, num(p, "port"))
		}
	}
	require.Contains(t, admitted, envoyPort)
	for _, p := range list(agentC, "ports") {
		require.NotContains(t, admitted, num(p, "containerPort"), "the agent's own port is not admitted: only Envoy's reaches it")
	}
}

// kustomizePatchTemplate renders the component's Deployment patch from the
// chart's named templates (added to the chart for the render only).
const kustomizePatchTemplate = `# Generated from envoy/helm/capgate's named templates (capgate.podSecurityContext,
# capgate.containers, capgate.volumes) by envoy/sidecar_test.go: change the chart, then
# ` + "`go test ./envoy -run TestSidecarKustomize -update`" + `. A strategic-merge patch: containers and
# volumes merge by name, so the Deployment's own are kept.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: capgate-sidecar   # any: the component's target selects the Deployment
spec:
  template:
    spec:
      securityContext:
        {{- include "capgate.podSecurityContext" . | nindent 8 }}
      # capgate's preStop sleep and its own drain (docs/envoy.md, "Shutdown").
      terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
      containers:
        {{- include "capgate.containers" . | trim | nindent 8 }}
      volumes:
        {{- include "capgate.volumes" . | trim | nindent 8 }}
`

// kustomizeValues are the chart's values the component's patch is rendered
// with: objects named capgate-*, the manifests from the capgate-manifests
// ConfigMap. The config is the overlay's own (capgate.yaml), not the chart's.
func kustomizeValues() map[string]any {
	return map[string]any{
		"fullnameOverride": "capgate",
		"form":             "sidecar",
		"sidecar":          map[string]any{"podLabels": map[string]any{"app.kubernetes.io/name": "any"}},
		"manifests":        map[string]any{"configMap": "capgate-manifests"},
		"config":           map[string]any{"agent": map[string]any{"name": "any", "description": "any", "version": "1.0.0", "url": "https://any.invalid"}},
	}
}

// TestSidecarKustomize keeps the component equal to the chart (its patch
// rendered from the named templates, its bootstrap envoy/bootstrap.yaml),
// then builds the my-agent overlay with kustomize's own library (krusty, what
// `kubectl apply -k` runs) and checks the pod as the chart's: my-agent's
// Deployment and Service, patched, every object decoded strictly.
func TestSidecarKustomize(t *testing.T) {
	component := filepath.Join(sidecarKustomizeDir, "capgate")
	t.Run("the component is the chart's", func(t *testing.T) {
		ch, err := loader.Load(chartDir)
		require.NoError(t, err)
		const patchName = "templates/zz-kustomize-patch.yaml"
		ch.Templates = append(ch.Templates, &common.File{Name: patchName, Data: []byte(kustomizePatchTemplate)})
		rv, err := util.ToRenderValues(ch, kustomizeValues(), common.ReleaseOptions{Name: "capgate", Namespace: "capgate", IsInstall: true}, common.DefaultCapabilities)
		require.NoError(t, err)
		files, err := engine.Engine{Strict: true}.RenderWithContext(t.Context(), ch, rv)
		require.NoError(t, err)
		golden.Equal(t, filepath.Join(component, "deployment.yaml"), []byte(files["capgate/"+patchName]))
		golden.Equal(t, filepath.Join(component, "bootstrap.yaml"), BootstrapYAML())

		// The overlay's capgate.yaml sets what the chart would for the same pod.
		out, err := renderRelease(t, "capgate", kustomizeValues())
		require.NoError(t, err)
		k := objectSet(t, parseDocs(t, "render", out))
		var chartCfg, overlayCfg config.Config
		require.NoError(t, yaml.Unmarshal([]byte(k.configMaps["capgate-config"]["capgate.yaml"]), &chartCfg))
		b, err := os.ReadFile(filepath.Join(sidecarKustomizeDir, "my-agent", "capgate.yaml"))
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(b, &overlayCfg))
		require.Equal(t, chartCfg.Listen, overlayCfg.Listen, "my-agent/capgate.yaml listen")
		require.Equal(t, chartCfg.Manifests, overlayCfg.Manifests, "my-agent/capgate.yaml manifests")
	})

	// The overlay and the component, in kustomize's in-memory filesystem,
	// with the admin token the operator would create.
	fSys := filesys.MakeFsInMemory()
	for _, dir := range []string{"capgate", "my-agent"} {
		root := filepath.Join(sidecarKustomizeDir, dir)
		require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(sidecarKustomizeDir, p)
			return fSys.WriteFile(filepath.Join("/k", rel), data)
		}))
	}
	require.NoError(t, fSys.WriteFile("/k/my-agent/admin-token", []byte(strings.Repeat("t", config.MinAdminTokenBytes))))
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fSys, "/k/my-agent")
	require.NoError(t, err)
	out, err := resMap.AsYaml()
	require.NoError(t, err)
	for name, doc := range releaseutil.SplitManifests(string(out)) {
		decodeStrict(t, name, []byte(doc))
	}
	k := objectSet(t, parseDocs(t, "kustomize build", out))
	checkSidecarPod(t, k, "my-agent", "my-agent")
	dep := k.object(t, "Deployment/my-agent")
	require.Equal(t, "my-agent", str(dep, "metadata", "namespace"))
	require.Equal(t, "/healthz", str(container(t, dep, "my-agent"), "readinessProbe", "httpGet", "path"), "the agent's own settings are kept")
}
