package envoy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"helm.sh/helm/v4/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/capgate/capgate/envoy/chartdoc"
	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	policyengine "github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/sidecar/metrics"
	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/test/golden"
)

// The Helm chart (envoy/helm/capgate) is rendered with Helm's own engine
// (helm.sh/helm/v4 as a library: the chart loader, values coalescing and
// template engine `helm template` runs), for the finance example and each
// variant docs/deploy.md documents. Every object is decoded strictly into its
// Kubernetes type, the Envoy bootstrap validated against Envoy's protos and
// checked, and capgate.yaml loaded by capgate's own loader with the manifests
// the pod mounts. The chart's defaults hold no example: the finance example
// is a values file (examples/finance.values.yaml) and envoy/kubernetes its
// render, kept equal here.

const (
	chartDir     = "helm/capgate"
	chartRelease = "finance-agent"
	// financeValuesFile is the finance example as values of the chart.
	financeValuesFile = chartDir + "/examples/finance.values.yaml"
	// envoyKubernetesRender is the finance example's render in envoy/kubernetes.
	envoyKubernetesRender = "kubernetes/finance-agent.yaml"
)

// financeValues are the values of `helm template -f
// examples/finance.values.yaml` with over given after it (as a second -f
// or --set: maps merge, anything else replaces), merged by Helm's own
// function for -f.
func financeValues(t *testing.T, over map[string]any) map[string]any {
	t.Helper()
	base, err := common.ReadValuesFile(financeValuesFile)
	require.NoError(t, err)
	return loader.MergeMaps(base.AsMap(), over)
}

// renderChart renders the chart as `helm template finance-agent
// envoy/helm/capgate` would, with vals over the chart's values.yaml: the
// templates that produce objects, in name order, each under a "# Source:"
// line. Missing values are errors (the engine's strict mode), and so are
// values values.schema.json refuses.
func renderChart(t *testing.T, vals map[string]any) ([]byte, error) {
	t.Helper()
	return renderRelease(t, chartRelease, vals)
}

// renderRelease is renderChart for the release named release (its namespace too).
func renderRelease(t *testing.T, release string, vals map[string]any) ([]byte, error) {
	t.Helper()
	return render(t, release, vals, false)
}

// render renders the chart; skipSchema is `helm template --skip-schema-validation`.
func render(t *testing.T, release string, vals map[string]any, skipSchema bool) ([]byte, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	rv, err := util.ToRenderValuesWithSchemaValidation(ch, vals, common.ReleaseOptions{Name: release, Namespace: release, IsInstall: true}, common.DefaultCapabilities, skipSchema)
	if err != nil {
		return nil, err
	}
	files, err := engine.Engine{Strict: true}.RenderWithContext(t.Context(), ch, rv)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name, content := range files {
		// `helm template --skip-tests`: the test hooks are TestChartHelmTest's.
		if strings.HasSuffix(name, ".yaml") && strings.TrimSpace(content) != "" && !strings.Contains(name, "/tests/") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out strings.Builder
	for _, name := range names {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", name, strings.TrimSpace(files[name]))
	}
	return []byte(out.String()), nil
}

// envoyKubernetesHeader heads envoy/kubernetes/finance-agent.yaml.
const envoyKubernetesHeader = "# Generated from envoy/helm/capgate with the finance example's values (helm template finance-agent\n" +
	"# envoy/helm/capgate -f envoy/helm/capgate/examples/finance.values.yaml --set adminToken.existingSecret=finance-agent-admin-token --skip-tests):\n" +
	"# change the chart or the example, then `go test ./envoy -run TestChartFinanceIsEnvoyKubernetes -update`.\n"

// envoyKubernetesValues are the values of envoy/kubernetes: the finance
// example, with the admin token from a Secret created beside it (a generated
// one would differ on every render).
func envoyKubernetesValues(t *testing.T) map[string]any {
	return financeValues(t, map[string]any{"adminToken": map[string]any{"existingSecret": chartRelease + "-admin-token"}})
}

// mustRender renders the chart and decodes every object strictly.
func mustRender(t *testing.T, vals map[string]any) (*kustomization, []byte) {
	t.Helper()
	return mustRenderRelease(t, chartRelease, vals)
}

// mustRenderRelease is mustRender for the release named release.
func mustRenderRelease(t *testing.T, release string, vals map[string]any) (*kustomization, []byte) {
	t.Helper()
	out, err := renderRelease(t, release, vals)
	require.NoError(t, err)
	docs := parseDocs(t, "render", out)
	require.NotEmpty(t, docs)
	for name, doc := range releaseutil.SplitManifests(string(out)) {
		decodeStrict(t, name, []byte(doc))
	}
	return objectSet(t, docs), out
}

// kubeTypes are the Kubernetes types the chart may render, by apiVersion and kind.
var kubeTypes = map[string]func() any{
	"v1/ConfigMap":                       func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                          func() any { return &corev1.Secret{} },
	"v1/Pod":                             func() any { return &corev1.Pod{} },
	"v1/Service":                         func() any { return &corev1.Service{} },
	"apps/v1/Deployment":                 func() any { return &appsv1.Deployment{} },
	"networking.k8s.io/v1/NetworkPolicy": func() any { return &networkingv1.NetworkPolicy{} },
	"policy/v1/PodDisruptionBudget":      func() any { return &policyv1.PodDisruptionBudget{} },
}

// customResources are the chart's objects of other APIs: Istio's (compared
// with envoy/istio, which TestIstio checks) and the Prometheus Operator's.
var customResources = []string{
	"security.istio.io/v1/AuthorizationPolicy",
	"networking.istio.io/v1/ServiceEntry",
	"monitoring.coreos.com/v1/ServiceMonitor",
	"monitoring.coreos.com/v1/PrometheusRule",
}

// decodeStrict decodes one rendered object into its Kubernetes type as the
// API server would read it from YAML; an unknown or duplicate field fails.
func decodeStrict(t *testing.T, name string, doc []byte) {
	t.Helper()
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	require.NoError(t, k8syaml.Unmarshal(doc, &meta), name)
	if meta.Kind == "" {
		return // only comments
	}
	gvk := meta.APIVersion + "/" + meta.Kind
	newObj, ok := kubeTypes[gvk]
	if !ok {
		require.Contains(t, customResources, gvk, "%s: the chart renders a type no test decodes", name)
		return
	}
	require.NoError(t, k8syaml.UnmarshalStrict(doc, newObj()), "%s (%s)", name, gvk)
}

// capgateFS is the capgate container's filesystem as far as ConfigMaps and
// Secrets make it: every file of every volume it mounts, at its path in the
// container (without the leading slash: etc/capgate/capgate.yaml).
func capgateFS(t *testing.T, k *kustomization, name string) fstest.MapFS {
	t.Helper()
	dep := k.object(t, "Deployment/"+name)
	fsys := fstest.MapFS{}
	for _, m := range list(container(t, dep, "capgate"), "volumeMounts") {
		for p, content := range volumeFiles(t, k, dep, str(m, "name")) {
			fsys[strings.TrimPrefix(path.Join(str(m, "mountPath"), p), "/")] = &fstest.MapFile{Data: []byte(content), Mode: 0o444}
		}
	}
	return fsys
}

// capgateConfigPath is capgate.yaml in capgateFS.
const capgateConfigPath = "etc/capgate/capgate.yaml"

// loadRenderedConfig loads capgate.yaml with capgate's own loader, and the
// manifests it names, as `capgate serve` would in the pod.
func loadRenderedConfig(t *testing.T, k *kustomization, name string, withManifests bool) *config.Config {
	t.Helper()
	cfg, err := config.LoadFS(capgateFS(t, k, name), capgateConfigPath)
	require.NoError(t, err)
	if withManifests {
		d, err := deployment.FromConfig(cfg)
		require.NoError(t, err)
		require.NotZero(t, len(d.Registry().All()))
	}
	return cfg
}

// TestChartFinanceIsEnvoyKubernetes: envoy/kubernetes is the chart rendered
// with the finance example's values, byte for byte, so the two cannot drift;
// -update rewrites it.
func TestChartFinanceIsEnvoyKubernetes(t *testing.T) {
	_, out := mustRender(t, envoyKubernetesValues(t))
	golden.Equal(t, envoyKubernetesRender, append([]byte(envoyKubernetesHeader), out...))
	k := loadKustomization(t, "kubernetes")
	require.Equal(t, []any{"namespace.yaml", filepath.Base(envoyKubernetesRender)}, list(readDocs(t, "kubernetes/kustomization.yaml")[0], "resources"))
	require.Equal(t, chartRelease, k.namespace)
}

// TestChartFiles: the chart's bootstrap is envoy/bootstrap.yaml (the one the
// Envoy tests validate), the example values' manifests the finance example's,
// and its appVersion the image tag `make image` gives.
func TestChartFiles(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "files", "bootstrap.yaml"))
	require.NoError(t, err)
	require.Equal(t, string(BootstrapYAML()), string(data), "envoy/helm/capgate/files/bootstrap.yaml must be a copy of envoy/bootstrap.yaml")

	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	files, _ := at(financeValues(t, nil), "manifests", "files").(map[string]any)
	require.NotEmpty(t, files)
	for name, content := range files {
		want, err := os.ReadFile(filepath.Join("..", "manifests", "finance", "capabilities", name+".yaml"))
		require.NoError(t, err)
		require.Equal(t, string(want), content, "%s manifests.files.%s", financeValuesFile, name)
	}

	t.Run("image tag is make image's", func(t *testing.T) {
		if _, err := exec.LookPath("make"); err != nil {
			t.Skip("make is not installed")
		}
		out, err := exec.Command("make", "-s", "-C", "..", "image-name").CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Equal(t, "capgate/capgate:"+ch.Metadata.AppVersion, strings.TrimSpace(string(out)))
		k, _ := mustRender(t, financeValues(t, nil))
		require.Equal(t, strings.TrimSpace(string(out)), str(container(t, k.object(t, "Deployment/"+chartRelease), "capgate"), "image"))
	})
}

// chartVariants are the value sets docs/deploy.md documents, over the finance
// example's values.
var chartVariants = []struct {
	name string
	vals map[string]any
}{
	{"defaults", nil},
	{"pinned by digest", map[string]any{"image": map[string]any{"repository": "registry.invalid/capgate", "digest": "sha256:" + strings.Repeat("ab", 32)}}},
	{"replicated on redis", map[string]any{
		"replicas":       3,
		"config":         map[string]any{"store": "redis://capgate-redis:6379/0"},
		"signingKey":     map[string]any{"existingSecret": "finance-agent-signing-key"},
		"serviceMonitor": map[string]any{"enabled": true},
	}},
	{"two replicas, no budget, own spread", map[string]any{
		"replicas":                  2,
		"config":                    map[string]any{"store": "redis://capgate-redis:6379/0"},
		"signingKey":                map[string]any{"existingSecret": "finance-agent-signing-key"},
		"podDisruptionBudget":       map[string]any{"enabled": false},
		"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "finance-agent"}}}},
	}},
	{"jwks file, push, tracing, decision logs", map[string]any{
		"jwks": map[string]any{"login": demoJWKS},
		"config": map[string]any{
			"auth": map[string]any{"issuers": []any{map[string]any{
				"issuer": "https://login.example.com", "audiences": []any{"finance-agent"},
				"jwks_file": "jwks/login.json", "algorithms": []any{"ES256"},
			}}},
			"push":          map[string]any{"enabled": true, "allowed_urls": []any{"https://hooks.example.com/"}},
			"tracing":       map[string]any{"otlp_endpoint": "http://otel-collector.observability:4318", "protocol": "http"},
			"services":      map[string]any{"logs": map[string]any{"url": "https://logs.example.com"}},
			"decision_logs": map[string]any{"service": "logs", "reporting": map[string]any{"min_delay_seconds": 5, "max_delay_seconds": 10}},
		},
	}},
	{"bundle", map[string]any{"bundle": map[string]any{"url": "https://bundles.example.com/finance.tar.gz", "verificationKey": "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"}}},
	{"istio", map[string]any{"mode": "istio"}},
	{"manifests from a ConfigMap of yours", map[string]any{"manifests": map[string]any{"files": nil, "configMap": "finance-manifests"}}},
	{"admin token from a Secret of yours", map[string]any{"adminToken": map[string]any{"existingSecret": "ops-admin-token", "key": "secret"}}},
	{"no network policy", map[string]any{"networkPolicy": map[string]any{"enabled": false}}},
}

// demoJWKS is the finance example's demo JWKS, for the jwks_file variant.
var demoJWKS = func() string {
	b, err := os.ReadFile("../manifests/finance/keys/demo.jwks.json")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func TestChartVariants(t *testing.T) {
	for _, v := range chartVariants {
		t.Run(v.name, func(t *testing.T) {
			k, _ := mustRender(t, financeValues(t, v.vals))
			if s := str(v.vals, "adminToken", "existingSecret"); s != "" {
				// The Secret the release names, created beside it.
				k.secrets[s] = map[string]string{str(v.vals, "adminToken", "key"): strings.Repeat("t", config.MinAdminTokenBytes)}
			}
			if cm := str(v.vals, "manifests", "configMap"); cm != "" {
				// The ConfigMap the release names, created beside it.
				k.configMaps[cm] = map[string]string{}
				for name, m := range at(financeValues(t, nil), "manifests", "files").(map[string]any) {
					k.configMaps[cm][name+".yaml"] = m.(string)
				}
				require.NotContains(t, k.objects, "ConfigMap/"+chartRelease+"-manifests")
			}
			if s := str(v.vals, "signingKey", "existingSecret"); s != "" {
				k.secrets[s] = map[string]string{"signing-key.pem": signingKeyPEM(t)}
			}
			istio := at(v.vals, "mode") == "istio"
			bundle := at(v.vals, "bundle", "url") != nil
			checkReferences(t, k, chartRelease)
			if istio {
				checkIstioPod(t, k)
			} else if !bundle {
				checkEnvoyPod(t, k, chartRelease)
			}
			cfg := loadRenderedConfig(t, k, chartRelease, !bundle)
			dep := k.object(t, "Deployment/"+chartRelease)
			capgateC := container(t, dep, "capgate")
			require.Equal(t, "serve", str(capgateC, "args", 0), "the image's entrypoint is /capgate")
			require.Nil(t, at(capgateC, "command"), "the image's entrypoint runs capgate")
			if bundle {
				require.Equal(t, at(v.vals, "bundle", "url"), flagValue(t, capgateC, "--bundle"))
				vol, rel := mountedFile(t, capgateC, flagValue(t, capgateC, "--bundle-verification-key"))
				require.Equal(t, at(v.vals, "bundle", "verificationKey"), volumeFiles(t, k, dep, vol)[rel])
				require.Equal(t, []string{"."}, cfg.Manifests, "a folder that exists; the bundle's capabilities are served")
				require.NotContains(t, k.objects, "ConfigMap/"+chartRelease+"-manifests")
			}
			if d := str(v.vals, "image", "digest"); d != "" {
				require.Equal(t, str(v.vals, "image", "repository")+"@"+d, str(capgateC, "image"))
			}
			if n := num(v.vals, "replicas"); n > 0 {
				require.Equal(t, n, num(dep, "spec", "replicas"))
				require.NotEqual(t, "memory", cfg.Store)
			}
			replicated := num(v.vals, "replicas") > 1
			if pdbOn := at(v.vals, "podDisruptionBudget", "enabled"); pdbOn == true || (pdbOn == nil && replicated) {
				pdb := k.object(t, "PodDisruptionBudget/"+chartRelease)
				require.Equal(t, at(dep, "spec", "selector"), at(pdb, "spec", "selector"))
			} else {
				require.NotContains(t, k.objects, "PodDisruptionBudget/"+chartRelease)
			}
			spread := list(dep, "spec", "template", "spec", "topologySpreadConstraints")
			switch {
			case at(v.vals, "topologySpreadConstraints") != nil:
				require.Equal(t, list(v.vals, "topologySpreadConstraints")[0].(map[string]any)["topologyKey"], str(spread, 0, "topologyKey"))
			case replicated:
				require.Len(t, spread, 1, "replicas spread over nodes by default")
				require.Equal(t, "kubernetes.io/hostname", str(spread, 0, "topologyKey"))
				require.Equal(t, at(dep, "spec", "selector", "matchLabels"), at(spread, 0, "labelSelector", "matchLabels"))
			default:
				require.Empty(t, spread)
			}
			if replicated {
				require.NotEmpty(t, cfg.Identity.SigningKeyFile, "replicas share a signing key")
			}
			if at(v.vals, "serviceMonitor", "enabled") == true {
				sm := k.object(t, "ServiceMonitor/"+chartRelease)
				svc := k.object(t, "Service/"+chartRelease+"-metrics")
				for key, val := range at(sm, "spec", "selector", "matchLabels").(obj) {
					require.Equal(t, val, at(svc, "metadata", "labels", key), "ServiceMonitor selects the metrics Service by %s", key)
				}
				require.Equal(t, str(sm, "spec", "endpoints", 0, "port"), str(svc, "spec", "ports", 0, "name"))
				require.Equal(t, containerPort(t, capgateC, "admin"), portOf(t, cfg.Listen.Admin))
			}
			t.Run("standard labels on every object and pod", func(t *testing.T) {
				for key, o := range k.objects {
					labels := at(o, "metadata", "labels")
					for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
						require.NotEmpty(t, str(labels, l), "%s: label %s", key, l)
					}
					require.Equal(t, chartRelease, str(labels, "app.kubernetes.io/instance"), key)
				}
				require.Equal(t, chartRelease, str(dep, "spec", "selector", "matchLabels", "app.kubernetes.io/instance"))
				require.Equal(t, chartRelease, str(dep, "spec", "template", "metadata", "labels", "app.kubernetes.io/instance"))
			})
			t.Run("admin token", func(t *testing.T) {
				secret, key := chartRelease+"-admin-token", "token"
				if s := str(v.vals, "adminToken", "existingSecret"); s != "" {
					secret, key = s, str(v.vals, "adminToken", "key")
					require.NotContains(t, k.objects, "Secret/"+chartRelease+"-admin-token", "no Secret is generated when one is named")
				} else {
					require.Len(t, k.secrets[secret][key], 64, "the generated token")
				}
				var found bool
				for _, v := range list(dep, "spec", "template", "spec", "volumes") {
					for _, s := range list(v, "projected", "sources") {
						if str(s, "secret", "name") == secret {
							require.Equal(t, key, str(s, "secret", "items", 0, "key"))
							vol, rel := mountedFile(t, capgateC, "/etc/capgate/"+cfg.Listen.AdminTokenFile)
							require.Equal(t, str(v, "name"), vol)
							require.Equal(t, str(s, "secret", "items", 0, "path"), rel)
							found = true
						}
					}
				}
				require.True(t, found, "capgate mounts the admin token's Secret %s at listen.admin_token_file", secret)
			})
			if at(v.vals, "networkPolicy", "enabled") == false {
				require.NotContains(t, k.objects, "NetworkPolicy/"+chartRelease)
			} else {
				require.Contains(t, k.objects, "NetworkPolicy/"+chartRelease)
			}
		})
	}
}

// checkIstioPod: with mode istio the pod has no Envoy; its AuthorizationPolicy
// and ServiceEntry are envoy/istio's (which TestIstio checks against the mesh
// config), and capgate listens where they and the Service say.
func checkIstioPod(t *testing.T, k *kustomization) {
	dep := k.object(t, "Deployment/"+chartRelease)
	for _, c := range list(dep, "spec", "template", "spec", "containers") {
		require.NotEqual(t, "envoy", str(c, "name"))
	}
	for _, f := range []struct{ file, key string }{
		{"authorization-policy.yaml", "AuthorizationPolicy/" + chartRelease + "-capgate"},
		{"service-entry.yaml", "ServiceEntry/capgate-extauthz"},
	} {
		want := readDocs(t, filepath.Join("istio", f.file))[0]
		got := k.object(t, f.key)
		require.Equal(t, at(want, "spec"), at(got, "spec"), "%s: spec differs from envoy/istio/%s", f.key, f.file)
	}
	cfg := loadRenderedConfig(t, k, chartRelease, true)
	require.Equal(t, config.DefaultListenExtAuthz, cfg.Listen.ExtAuthz, "ext_authz stays on the pod's loopback")
	capgateC := container(t, dep, "capgate")
	gateway := portOf(t, cfg.Listen.A2A)
	require.Equal(t, gateway, containerPort(t, capgateC, at(k.object(t, "Service/"+chartRelease), "spec", "ports", 0, "targetPort")))
	require.Equal(t, gateway, num(k.object(t, "NetworkPolicy/"+chartRelease), "spec", "ingress", 0, "ports", 0, "port"))
	istioSvc := readDocs(t, "istio/service.yaml")[0]
	require.Equal(t, num(istioSvc, "spec", "ports", 0, "targetPort"), gateway)
}

// TestChartRefuses: values the chart cannot deploy safely fail the render
// with a message naming the value.
func TestChartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"no manifests, no bundle", map[string]any{"manifests": map[string]any{"files": nil}}, "no capability to serve: manifests.files is empty and bundle.url is not set. Give one capability manifest per key, manifests.files.<name>"},
		{"no agent container", map[string]any{"agent": map[string]any{"image": ""}}, "agent.image is not set"},
		{"replicas on memory", map[string]any{"replicas": 2, "signingKey": map[string]any{"existingSecret": "k"}}, "replicas > 1 needs a shared store"},
		{"replicas without a shared signing key", map[string]any{"replicas": 2, "config": map[string]any{"store": "redis://r:6379/0"}}, "replicas > 1 needs a shared signing key: set signingKey.existingSecret"},
		{"manifests twice", map[string]any{"manifests": map[string]any{"configMap": "cm"}}, "manifests.files and manifests.configMap are both set"},
		{"signing key twice", map[string]any{"signingKey": map[string]any{"existingSecret": "k"}, "config": map[string]any{"identity": map[string]any{"signing_key_file": "/k.pem"}}}, "config.identity.signing_key_file and signingKey.existingSecret are both set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChart(t, financeValues(t, tc.vals))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	// The templates' own guards, for renders that skip the schema
	// (--skip-schema-validation), which refuses these first.
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"listen set", map[string]any{"config": map[string]any{"listen": map[string]any{"admin": "0.0.0.0:1"}}}, "config.listen is set by the chart"},
		{"unknown mode", map[string]any{"mode": "linkerd"}, "mode must be envoy or istio"},
		{"digest not sha256", map[string]any{"image": map[string]any{"digest": "latest"}}, "image.digest must be sha256:<hex>"},
	} {
		t.Run(tc.name+" (no schema)", func(t *testing.T) {
			_, err := render(t, chartRelease, financeValues(t, tc.vals), true)
			require.ErrorContains(t, err, tc.want)
			_, err = renderChart(t, financeValues(t, tc.vals))
			require.ErrorContains(t, err, "values don't meet the specifications of the schema")
		})
	}
}

// ownValues are a release of an agent that is not the finance example: its
// own identity, issuer, handlers, image and two manifests, over the chart's
// defaults only.
func ownValues() map[string]any {
	manifest := func(id, handler, name string) string {
		return "id: " + id + "\nstate: ga\nvisibility: public\nskill:\n  name: " + name +
			"\n  description: " + name + " for a place and a day.\n  tags: [weather]\n  examples:\n    - \"" + name + " for Lyon tomorrow\"\n" +
			"requires_scopes: []\ntenants: \"*\"\nhandler: " + handler + "\nowner: weather-team\n"
	}
	return map[string]any{
		"config": map[string]any{
			"agent": map[string]any{"name": "Weather agent", "description": "Forecasts and storm alerts.", "version": "2.1.0", "url": "https://weather.example.net"},
			"auth": map[string]any{"issuers": []any{map[string]any{
				"issuer": "https://id.example.net", "audiences": []any{"weather-agent"},
				"jwks_file": "jwks/id.json", "algorithms": []any{"ES256"},
			}}},
			"handlers": map[string]any{"weather.forecast": "http://127.0.0.1:7000/forecast", "weather.alerts": "http://127.0.0.1:7000/alerts"},
		},
		"jwks": map[string]any{"id": demoJWKS},
		"manifests": map[string]any{"files": map[string]any{
			"forecast":     manifest("forecast", "weather.forecast", "Forecast"),
			"storm-alerts": manifest("storm-alerts", "weather.alerts", "Storm alerts"),
		}},
		"agent": map[string]any{"image": "registry.example.net/weather-agent:2.1.0"},
	}
}

// TestChartReleaseHoldsOnlyItsValues: a release rendered with the chart's
// defaults and only its own values publishes only its own skills — the
// public card built by capgate's own loader and engine from what the pod
// mounts — and nothing of the finance example is anywhere in the render.
func TestChartReleaseHoldsOnlyItsValues(t *testing.T) {
	const release = "weather-agent"
	k, out := mustRenderRelease(t, release, ownValues())
	checkReferences(t, k, release)
	checkEnvoyPod(t, k, release)

	cfg := loadRenderedConfig(t, k, release, true)
	d, err := deployment.FromConfig(cfg)
	require.NoError(t, err)
	var ids []string
	for _, c := range d.Registry().All() {
		ids = append(ids, c.ID)
	}
	sort.Strings(ids)
	require.Equal(t, []string{"forecast", "storm-alerts"}, ids, "the registry holds the release's manifests only")
	e, err := policyengine.New(t.Context(), d.Snapshot)
	require.NoError(t, err)
	pub, err := card.Public(t.Context(), d.Config, e)
	require.NoError(t, err)
	var skills []string
	for _, s := range pub.Skills {
		skills = append(skills, s.ID)
	}
	require.Equal(t, []string{"forecast", "storm-alerts"}, skills, "the public card lists the release's skills only")
	require.Equal(t, "Weather agent", pub.Name)
	require.Equal(t, map[string]string{"weather.forecast": "http://127.0.0.1:7000/forecast", "weather.alerts": "http://127.0.0.1:7000/alerts"}, cfg.Handlers)

	// The example's words, and its agent image and issuer, appear nowhere.
	for i, line := range strings.Split(strings.ToLower(string(out)), "\n") {
		for _, word := range []string{"finance", "invoice", "recon", "login.example.com"} {
			require.NotContains(t, line, word, "line %d: the finance example leaked into a release that does not use it", i+1)
		}
	}
}

// TestChartDefaultsRefuse: the chart's defaults alone are no deployment: the
// render fails and says what to give.
func TestChartDefaultsRefuse(t *testing.T) {
	_, err := renderChart(t, nil)
	require.Error(t, err)
	require.Regexp(t, `config\.agent is not set|no capability to serve|agent\.image is not set`, err.Error())
	vals := ownValues()
	delete(vals["config"].(map[string]any), "agent")
	_, err = renderChart(t, vals)
	require.ErrorContains(t, err, "config.agent is not set: give the agent's card identity, config.agent.name, description, version and url")
	vals = ownValues()
	delete(vals, "manifests")
	_, err = renderChart(t, vals)
	require.ErrorContains(t, err, "no capability to serve: manifests.files is empty and bundle.url is not set. Give one capability manifest per key, manifests.files.<name>")
}

// signingKeyPEM is a fresh P-256 private key in PEM (PKCS #8), as
// `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256` writes.
func signingKeyPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// schemaFile is the chart's values schema, which Helm applies to every
// install, upgrade, template and lint.
const schemaFile = chartDir + "/values.schema.json"

// readSchema reads values.schema.json as a generic JSON value.
func readSchema(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(schemaFile)
	require.NoError(t, err)
	var s map[string]any
	require.NoError(t, json.Unmarshal(b, &s))
	return s
}

// withSet applies `--set` expressions over vals, with Helm's own parser.
func withSet(t *testing.T, vals map[string]any, sets ...string) map[string]any {
	t.Helper()
	for _, s := range sets {
		require.NoError(t, strvals.ParseInto(s, vals), s)
	}
	return vals
}

// TestChartSchema: values.schema.json refuses typos (an unknown key at any
// level the chart reads), wrong types and values outside an enum, with
// Helm's message naming the value; the defaults and the example pass.
func TestChartSchema(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want string
	}{
		{"replica=3", "additional properties 'replica' not allowed"},
		{"podDisruptionBudget.enable=true", "at '/podDisruptionBudget': additional properties 'enable' not allowed"},
		{"envoy.image.tags=v1", "at '/envoy/image': additional properties 'tags' not allowed"},
		{"config.handler.x=http://127.0.0.1:1/", "at '/config': additional properties 'handler' not allowed"},
		{"serviceMonitor.enabled=yes", "at '/serviceMonitor/enabled'"},
		{"replicas=three", "at '/replicas'"},
		{"replicas=0", "at '/replicas'"},
		{"mode=linkerd", "at '/mode': value must be one of 'envoy', 'istio'"},
		{"logLevel=verbose", "at '/logLevel'"},
		{"adminPort=70000", "at '/adminPort'"},
		{"podDisruptionBudget.enabled=maybe", "at '/podDisruptionBudget/enabled'"},
		{"shutdownTimeout=15", "at '/shutdownTimeout'"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := renderChart(t, withSet(t, financeValues(t, nil), tc.set))
			require.ErrorContains(t, err, "values don't meet the specifications of the schema")
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("the example and a release of one's own pass", func(t *testing.T) {
		_, err := renderChart(t, withSet(t, financeValues(t, nil), "podDisruptionBudget.enabled=true", "replicas=1", "envoy.logLevel=warning"))
		require.NoError(t, err)
		_, err = renderChart(t, ownValues())
		require.NoError(t, err)
	})

	s := readSchema(t)
	t.Run("config's keys are capgate.yaml's, but those the chart sets", func(t *testing.T) {
		var want []string
		ty := reflect.TypeFor[config.Config]()
		for i := range ty.NumField() {
			name, _, _ := strings.Cut(ty.Field(i).Tag.Get("yaml"), ",")
			if name != "" && name != "-" && name != "listen" && name != "manifests" {
				want = append(want, name)
			}
		}
		props, _ := at(s, "properties", "config", "properties").(map[string]any)
		got := make([]string, 0, len(props))
		for k := range props {
			got = append(got, k)
		}
		require.ElementsMatch(t, want, got)
		require.Equal(t, false, at(s, "properties", "config", "additionalProperties"))
		require.ElementsMatch(t, yamlKeys(reflect.TypeFor[config.Agent]()), keys(at(s, "properties", "config", "properties", "agent", "properties")), "config.agent")
	})
	t.Run("every object refuses unknown keys and every value is described", func(t *testing.T) {
		var walk func(path string, node map[string]any)
		walk = func(path string, node map[string]any) {
			props, ok := node["properties"].(map[string]any)
			if !ok {
				return
			}
			require.Equal(t, false, node["additionalProperties"], "%s: unknown keys must fail", path)
			for name, p := range props {
				p := p.(map[string]any)
				require.NotEmpty(t, p["description"], "%s.%s has no description", path, name)
				if ref, ok := p["$ref"].(string); ok {
					def := at(s, "$defs", strings.TrimPrefix(ref, "#/$defs/")).(map[string]any)
					walk(path+"."+name, def)
				}
				walk(path+"."+name, p)
			}
		}
		walk("", s)
	})
	t.Run("modes", func(t *testing.T) {
		require.ElementsMatch(t, chartModes, list(at(s, "properties", "mode"), "enum"))
	})
}

// yamlKeys are the YAML keys of a struct type's fields.
func yamlKeys(ty reflect.Type) []string {
	var out []string
	for i := range ty.NumField() {
		if name, _, _ := strings.Cut(ty.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// keys are the keys of a decoded JSON object.
func keys(v any) []string {
	m, _ := v.(map[string]any)
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestChartMetrics: with the ServiceMonitor, Envoy's stats listener (the
// bootstrap's, GET /stats/prometheus only) is a container port, a port of
// the metrics Service, a ServiceMonitor endpoint and a port the
// NetworkPolicy admits from Prometheus; the PrometheusRule's alerts name the
// bootstrap's clusters and capgate's reload metric.
func TestChartMetrics(t *testing.T) {
	k, _ := mustRender(t, financeValues(t, map[string]any{
		"serviceMonitor": map[string]any{"enabled": true},
		"prometheusRule": map[string]any{"enabled": true},
	}))
	b, err := DefaultBootstrap()
	require.NoError(t, err)
	statsPort := listenerPort(t, b, "stats")
	dep := k.object(t, "Deployment/"+chartRelease)
	require.Equal(t, statsPort, containerPort(t, container(t, dep, "envoy"), "envoy-stats"))
	svc := k.object(t, "Service/"+chartRelease+"-metrics")
	var svcPort string
	for _, p := range list(svc, "spec", "ports") {
		if str(p, "targetPort") == "envoy-stats" {
			svcPort = str(p, "name")
		}
	}
	require.NotEmpty(t, svcPort, "the metrics Service has Envoy's stats port")
	var scraped bool
	for _, e := range list(k.object(t, "ServiceMonitor/"+chartRelease), "spec", "endpoints") {
		if str(e, "port") == svcPort {
			require.Equal(t, StatsPath, str(e, "path"))
			scraped = true
		}
	}
	require.True(t, scraped, "the ServiceMonitor scrapes Envoy's stats")
	np := k.object(t, "NetworkPolicy/"+chartRelease)
	var fromPrometheus []int
	for _, p := range list(np, "spec", "ingress", 1, "ports") {
		fromPrometheus = append(fromPrometheus, num(p, "port"))
	}
	require.Contains(t, fromPrometheus, statsPort)

	var exprs []string
	for _, g := range list(k.object(t, "PrometheusRule/"+chartRelease), "spec", "groups") {
		for _, r := range list(g, "rules") {
			exprs = append(exprs, str(r, "expr"))
		}
	}
	all := strings.Join(exprs, "\n")
	extauthz := clusterNamed(t, b, "capgate_extauthz")
	require.Contains(t, all, `envoy_cluster_name="`+extauthz+`"`)
	require.Contains(t, all, `envoy_cluster_name="capgate_gateway"`)
	require.Contains(t, all, `capgate_reloads_total{namespace="`+chartRelease+`", result="`+reload.ResultRejected+`"}`)
	// capgate's store-health series, by the names its registry gives them.
	m := metrics.New()
	m.StoreErrors.WithLabelValues("any").Add(0) // a vector shows once it has a series
	m.Reloads.WithLabelValues(reload.ResultRejected).Add(0)
	names := map[string]bool{}
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, m := range []string{"capgate_store_reachable", "capgate_store_errors_total", "capgate_reloads_total"} {
		require.True(t, names[m], "capgate exports %s", m)
		require.Contains(t, all, m+"{")
	}
}

// clusterNamed requires the bootstrap to define the cluster and returns its name.
func clusterNamed(t *testing.T, b *bootstrapv3.Bootstrap, name string) string {
	t.Helper()
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == name {
			return name
		}
	}
	require.Failf(t, "no cluster", "bootstrap has no cluster %q", name)
	return ""
}

// TestChartREADME: the chart's README is generated from values.schema.json
// and values.yaml (`make chart`, or -update here), so it documents every
// value the schema admits, with its description and default.
func TestChartREADME(t *testing.T) {
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	readme, err := chartdoc.README(chartdoc.Chart{Name: ch.Metadata.Name, Description: ch.Metadata.Description, Version: ch.Metadata.Version, AppVersion: ch.Metadata.AppVersion}, ch.Schema, ch.Values)
	require.NoError(t, err)
	golden.Equal(t, filepath.Join(chartDir, "README.md"), readme)
	for _, want := range []string{"| `replicas` |", "| `podDisruptionBudget.enabled` |", "| `adminToken.existingSecret` |", "| `envoy.statsPort` |"} {
		require.Contains(t, string(readme), want)
	}
}

// TestChartHelmTest: `helm test` runs one hook Pod that asks capgate's
// /readyz through the metrics Service (which the NetworkPolicy admits it
// to) and reads the public card through the Service; it carries none of the
// pods' selector labels, so no Service, budget or policy selects it.
func TestChartHelmTest(t *testing.T) {
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	rv, err := util.ToRenderValues(ch, financeValues(t, nil), common.ReleaseOptions{Name: chartRelease, Namespace: chartRelease, IsInstall: true}, common.DefaultCapabilities)
	require.NoError(t, err)
	files, err := engine.Engine{Strict: true}.RenderWithContext(t.Context(), ch, rv)
	require.NoError(t, err)
	text := files["capgate/templates/tests/test-capgate.yaml"]
	decodeStrict(t, "test-capgate.yaml", []byte(text))
	pod := parseDocs(t, "test-capgate.yaml", []byte(text))[0]
	require.Equal(t, "test", str(pod, "metadata", "annotations", "helm.sh/hook"))
	script := str(pod, "spec", "containers", 0, "command", 3)
	require.Contains(t, script, `get("`+chartRelease+`-metrics", 9090, "/readyz")`)
	require.Contains(t, script, `get("`+chartRelease+`", 80, "`+PublicCardPath+`")`)
	require.Equal(t, "CARD_NAME", str(pod, "spec", "containers", 0, "env", 0, "name"))
	require.Equal(t, `"name":"Finance agent"`, str(pod, "spec", "containers", 0, "env", 0, "value"))

	k, _ := mustRender(t, financeValues(t, nil))
	selector := at(k.object(t, "Deployment/"+chartRelease), "spec", "selector", "matchLabels").(obj)
	labels := at(pod, "metadata", "labels").(obj)
	matches := true
	for key, v := range selector {
		matches = matches && labels[key] == v
	}
	require.False(t, matches, "the test pod must not carry the pods' selector labels")
	np := k.object(t, "NetworkPolicy/"+chartRelease)
	admitted := false
	for _, from := range list(np, "spec", "ingress", 1, "from") {
		sel, _ := at(from, "podSelector", "matchLabels").(obj)
		if at(from, "namespaceSelector") != nil || len(sel) == 0 {
			continue
		}
		ok := true
		for key, v := range sel {
			ok = ok && labels[key] == v
		}
		admitted = admitted || ok
	}
	require.True(t, admitted, "the NetworkPolicy admits the test pod to the admin port")
	require.Contains(t, k.objects, "Service/"+chartRelease+"-metrics")
}
