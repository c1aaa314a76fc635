package envoy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

// capgate as a sidecar of a workload it did not write: envoy/sidecar holds a
// chart of the user's own (helm/my-agent) that adds capgate through the named
// templates of capgate's chart, and a kustomize component that patches an
// existing Deployment and Service. Each is rendered here, every object
// decoded strictly into its Kubernetes type, and the resulting pod put
// through the checks of the chart's own pod.

const (
	sidecarChartDir = "sidecar/helm/my-agent"
	sidecarRelease  = "my-agent"
)

// sidecarManifest is the one capability of the my-agent examples.
const sidecarManifest = `id: answer
state: ga
visibility: public
skill:
  name: Answer a question
  description: Answers a question about the team's services.
  tags: [support]
  examples:
    - "Which service owns the billing queue?"
requires_scopes: []
tenants: "*"
handler: my-agent.answer
owner: platform-team
`

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

	vals := map[string]any{"capgate": map[string]any{"manifests": map[string]any{"files": map[string]any{"answer": sidecarManifest}}}}
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
	require.Equal(t, []string{agent, "envoy", "capgate"}, names, "the workload's container, then capgate's")
	envoyC := container(t, dep, "envoy")
	agentC := container(t, dep, agent)
	svc := k.object(t, "Service/"+name)
	require.Len(t, list(svc, "spec", "ports"), 1)
	require.Equal(t, "a2a", str(svc, "spec", "ports", 0, "targetPort"), "the Service targets Envoy")
	envoyPort := containerPort(t, envoyC, "a2a")
	np := k.object(t, "NetworkPolicy/"+name)
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
	require.Equal(t, int64(65532), int64(num(dep, "spec", "template", "spec", "securityContext", "fsGroup")))
}
