package envoy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/config"
)

// The Kubernetes and Istio examples are read into generic maps and
// cross-checked against each other, the Envoy bootstrap and capgate's config.
// envoy/kubernetes is the Helm chart (envoy/helm/capgate) rendered with its
// defaults (helm_test.go keeps the two equal and decodes every object
// strictly into its Kubernetes type); the checks here run on that render and
// on each of the chart's variants.

type obj = map[string]any

// readDocs parses every document of a multi-document YAML file.
func readDocs(t *testing.T, path string) []obj {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return parseDocs(t, path, data)
}

// parseDocs parses every document of a multi-document YAML text.
func parseDocs(t *testing.T, path string, data []byte) []obj {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []obj
	for {
		var d obj
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		require.NoError(t, err, path)
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// at walks keys (string) and indexes (int) into a generic YAML value.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(obj)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string { s, _ := at(v, path...).(string); return s }
func list(v any, path ...any) []any { l, _ := at(v, path...).([]any); return l }
func num(v any, path ...any) int    { n, _ := at(v, path...).(int); return n }

// kustomization is a set of Kubernetes objects to check (envoy/kubernetes,
// or a render of the chart): the objects by kind and name, and the data of
// each ConfigMap and Secret.
type kustomization struct {
	namespace  string
	objects    map[string]obj               // "Kind/name"
	configMaps map[string]map[string]string // name -> key -> content
	secrets    map[string]map[string]string // name -> key -> decoded content
}

func loadKustomization(t *testing.T, dir string) *kustomization {
	t.Helper()
	k := readDocs(t, filepath.Join(dir, "kustomization.yaml"))[0]
	require.Nil(t, at(k, "configMapGenerator"), "ConfigMaps come from the chart's render")
	var docs []obj
	for _, r := range list(k, "resources") {
		docs = append(docs, readDocs(t, filepath.Join(dir, r.(string)))...)
	}
	out := objectSet(t, docs)
	out.namespace = str(k, "namespace")
	return out
}

// objectSet indexes rendered objects.
func objectSet(t *testing.T, docs []obj) *kustomization {
	t.Helper()
	out := &kustomization{objects: map[string]obj{}, configMaps: map[string]map[string]string{}, secrets: map[string]map[string]string{}}
	for _, d := range docs {
		key := str(d, "kind") + "/" + str(d, "metadata", "name")
		require.NotContains(t, out.objects, key, "defined twice")
		out.objects[key] = d
		if str(d, "kind") == "ConfigMap" {
			data := map[string]string{}
			m, _ := at(d, "data").(obj)
			for k, v := range m {
				data[k] = v.(string)
			}
			out.configMaps[str(d, "metadata", "name")] = data
		}
		if str(d, "kind") == "Secret" {
			data := map[string]string{}
			m, _ := at(d, "data").(obj)
			for k, v := range m {
				b, err := base64.StdEncoding.DecodeString(v.(string))
				require.NoError(t, err, "Secret %s key %s", str(d, "metadata", "name"), k)
				data[k] = string(b)
			}
			out.secrets[str(d, "metadata", "name")] = data
		}
	}
	return out
}

func (k *kustomization) object(t *testing.T, kindName string) obj {
	t.Helper()
	o, ok := k.objects[kindName]
	require.True(t, ok, "%s not among the kustomization's resources", kindName)
	return o
}

func container(t *testing.T, dep obj, name string) obj {
	t.Helper()
	for _, c := range list(dep, "spec", "template", "spec", "containers") {
		if str(c, "name") == name {
			return c.(obj)
		}
	}
	require.Failf(t, "no container", "container %q not in the Deployment", name)
	return nil
}

// containerPort resolves a probe's or Service's port (number or name) against a container.
func containerPort(t *testing.T, c obj, port any) int {
	t.Helper()
	if n, ok := port.(int); ok {
		return n
	}
	for _, p := range list(c, "ports") {
		if str(p, "name") == port {
			return num(p, "containerPort")
		}
	}
	require.Failf(t, "unknown port", "container %q has no port named %v", str(c, "name"), port)
	return 0
}

// mountedFile maps an absolute path inside container c to the volume that holds it
// and the path relative to the mount.
func mountedFile(t *testing.T, c obj, path string) (volume, rel string) {
	t.Helper()
	for _, m := range list(c, "volumeMounts") {
		mp := str(m, "mountPath")
		if r, err := filepath.Rel(mp, path); err == nil && !strings.HasPrefix(r, "..") {
			return str(m, "name"), r
		}
	}
	require.Failf(t, "not mounted", "container %q: %s is under no volumeMount", str(c, "name"), path)
	return "", ""
}

// volumeFiles lists what a ConfigMap- or Secret-backed volume holds: path in
// volume -> content (a Secret the objects do not hold contributes nothing).
func volumeFiles(t *testing.T, k *kustomization, dep obj, volume string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, v := range list(dep, "spec", "template", "spec", "volumes") {
		if str(v, "name") != volume {
			continue
		}
		sources := []any{obj{"configMap": at(v, "configMap")}}
		if at(v, "projected") != nil {
			sources = list(v, "projected", "sources")
		}
		for _, s := range sources {
			data, kind := k.configMaps[str(s, "configMap", "name")], "configMap"
			if at(s, "secret") != nil {
				data, kind = k.secrets[str(s, "secret", "name")], "secret"
			}
			if data == nil {
				continue
			}
			items := list(s, kind, "items")
			if items == nil {
				for key, f := range data {
					files[key] = f
				}
			}
			for _, it := range items {
				files[str(it, "path")] = data[str(it, "key")]
			}
		}
	}
	return files
}

func portOf(t *testing.T, hostPort string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(hostPort)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

func listenerPort(t *testing.T, b *bootstrapv3.Bootstrap, name string) int {
	t.Helper()
	for _, l := range b.GetStaticResources().GetListeners() {
		if l.GetName() == name {
			return int(l.GetAddress().GetSocketAddress().GetPortValue())
		}
	}
	require.Failf(t, "no listener", "bootstrap has no listener %q", name)
	return 0
}

// clusterSocket is the Unix socket path of a cluster's one endpoint.
func clusterSocket(t *testing.T, b *bootstrapv3.Bootstrap, name string) string {
	t.Helper()
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == name {
			pipe := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetPipe()
			require.NotNil(t, pipe, "cluster %q: endpoint is not a pipe", name)
			return pipe.GetPath()
		}
	}
	require.Failf(t, "no cluster", "bootstrap has no cluster %q", name)
	return ""
}

// unixPath is the socket path of a capgate listen address, which must be a Unix socket.
func unixPath(t *testing.T, addr string) string {
	t.Helper()
	network, path := config.Network(addr)
	require.Equal(t, "unix", network, "%s must be a Unix socket", addr)
	return path
}

// mountedBy lists the containers that mount the volume holding dir.
func mountedBy(dep obj, dir string) []string {
	var out []string
	for _, c := range list(dep, "spec", "template", "spec", "containers") {
		for _, m := range list(c, "volumeMounts") {
			if r, err := filepath.Rel(str(m, "mountPath"), dir); err == nil && !strings.HasPrefix(r, "..") {
				out = append(out, str(c, "name"))
			}
		}
	}
	sort.Strings(out)
	return out
}

// quantityBytes reads a Kubernetes memory quantity with a binary suffix.
func quantityBytes(t *testing.T, q string) uint64 {
	t.Helper()
	for suffix, mult := range map[string]uint64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseUint(n, 10, 64)
			require.NoError(t, err, q)
			return v * mult
		}
	}
	require.Failf(t, "quantity", "%q: want a binary suffix (Ki, Mi, Gi)", q)
	return 0
}

// preStopSleep is a container's lifecycle.preStop.sleep.seconds, or the
// seconds of the last "sleep N" line of its exec script.
func preStopSleep(t *testing.T, c obj) int {
	t.Helper()
	if n := num(c, "lifecycle", "preStop", "sleep", "seconds"); n > 0 {
		return n
	}
	script := str(c, "lifecycle", "preStop", "exec", "command", 2)
	m := regexp.MustCompile(`(?m)^sleep (\d+)$`).FindAllStringSubmatch(script, -1)
	require.NotEmpty(t, m, "container %s: no preStop sleep", str(c, "name"))
	n, err := strconv.Atoi(m[len(m)-1][1])
	require.NoError(t, err)
	return n
}

// flagValue is the value after flag in a container's args.
func flagValue(t *testing.T, c obj, flag string) string {
	t.Helper()
	args := list(c, "args")
	i := slices.Index(args, any(flag))
	require.True(t, i >= 0 && i+1 < len(args), "container %s: no %s", str(c, "name"), flag)
	return args[i+1].(string)
}

func loadCapgateConfig(t *testing.T, path, data string) config.Config {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(data))
	dec.KnownFields(true)
	var cfg config.Config
	require.NoError(t, dec.Decode(&cfg), path)
	return cfg
}

func TestKubernetesReferences(t *testing.T) {
	checkReferences(t, loadKustomization(t, "kubernetes"), "finance-agent")
}

func TestKubernetesMatchesBootstrapAndConfig(t *testing.T) {
	k := loadKustomization(t, "kubernetes")
	checkEnvoyPod(t, k, "finance-agent")
	dep := k.object(t, "Deployment/finance-agent")
	envoyC := container(t, dep, "envoy")
	t.Run("Envoy runs envoy/bootstrap.yaml", func(t *testing.T) {
		vol, rel := mountedFile(t, envoyC, flagValue(t, envoyC, "-c"))
		require.Equal(t, string(BootstrapYAML()), volumeFiles(t, k, dep, vol)[rel])
	})
	t.Run("capgate serves the finance example's manifests", func(t *testing.T) {
		vol, _ := mountedFile(t, container(t, dep, "capgate"), "/etc/capgate/capgate.yaml")
		n := 0
		for p, content := range volumeFiles(t, k, dep, vol) {
			if name, ok := strings.CutPrefix(p, "manifests/"); ok {
				want, err := os.ReadFile(filepath.Join("..", "manifests", "finance", "capabilities", name))
				require.NoError(t, err)
				require.Equal(t, string(want), content, p)
				n++
			}
		}
		require.Positive(t, n)
	})
}

// checkReferences: every volume, ConfigMap and key the Deployment name exists,
// and every container is hardened.
func checkReferences(t *testing.T, k *kustomization, name string) {
	dep := k.object(t, "Deployment/"+name)
	volumes := map[string]obj{}
	for _, v := range list(dep, "spec", "template", "spec", "volumes") {
		volumes[str(v, "name")] = v.(obj)
	}

	t.Run("every volumeMount has a volume", func(t *testing.T) {
		for _, c := range list(dep, "spec", "template", "spec", "containers") {
			for _, m := range list(c, "volumeMounts") {
				require.Contains(t, volumes, str(m, "name"), "container %s", str(c, "name"))
			}
		}
	})
	t.Run("every ConfigMap volume names a ConfigMap and its keys", func(t *testing.T) {
		for name, v := range volumes {
			sources := []any{obj{"configMap": at(v, "configMap")}}
			if at(v, "projected") != nil {
				sources = list(v, "projected", "sources")
			}
			for _, s := range sources {
				if at(s, "configMap") == nil {
					continue
				}
				cm, ok := k.configMaps[str(s, "configMap", "name")]
				require.True(t, ok, "volume %s: ConfigMap %q is neither generated nor a resource", name, str(s, "configMap", "name"))
				for _, it := range list(s, "configMap", "items") {
					require.Contains(t, cm, str(it, "key"), "volume %s", name)
				}
			}
		}
	})
	t.Run("every manifest in the ConfigMap is projected", func(t *testing.T) {
		projected := volumeFiles(t, k, dep, "capgate-config")
		for key := range k.configMaps[name+"-manifests"] {
			require.Contains(t, projected, "manifests/"+key)
		}
	})
	t.Run("pod hardening", func(t *testing.T) {
		for _, c := range list(dep, "spec", "template", "spec", "containers") {
			name := str(c, "name")
			require.Equal(t, true, at(c, "securityContext", "runAsNonRoot"), name)
			require.Equal(t, true, at(c, "securityContext", "readOnlyRootFilesystem"), name)
			require.Equal(t, false, at(c, "securityContext", "allowPrivilegeEscalation"), name)
			require.Equal(t, []any{"ALL"}, at(c, "securityContext", "capabilities", "drop"), name)
			require.NotNil(t, at(c, "resources", "requests", "memory"), name)
			require.NotNil(t, at(c, "resources", "limits", "memory"), name)
		}
	})
}

// checkEnvoyPod cross-checks the Deployment name (mode envoy), its Service
// and NetworkPolicy against the Envoy bootstrap and the capgate.yaml it
// mounts: ports, sockets, probes, streams, the drain sequence, memory.
func checkEnvoyPod(t *testing.T, k *kustomization, name string) {
	dep := k.object(t, "Deployment/"+name)
	envoyC := container(t, dep, "envoy")
	capgateC := container(t, dep, "capgate")

	// Envoy runs the bootstrap its ConfigMap holds; it must be valid and pass Check.
	vol, rel := mountedFile(t, envoyC, flagValue(t, envoyC, "-c"))
	data, ok := volumeFiles(t, k, dep, vol)[rel]
	require.True(t, ok, "volume %s has no %s", vol, rel)
	b, err := parseBootstrap([]byte(data))
	require.NoError(t, err)
	require.NoError(t, validateBootstrap(b))
	require.NoError(t, checkBootstrap(b))
	a2aPort := listenerPort(t, b, "a2a")

	// capgate runs the capgate.yaml of this folder.
	cargs := list(capgateC, "args")
	j := slices.Index(cargs, any("--config"))
	require.GreaterOrEqual(t, j, 0, "capgate args have no --config")
	require.Equal(t, "serve", cargs[0])
	vol, rel = mountedFile(t, capgateC, cargs[j+1].(string))
	capgateFiles := volumeFiles(t, k, dep, vol)
	require.Contains(t, capgateFiles, rel)
	cfg := loadCapgateConfig(t, rel, capgateFiles[rel])

	tests := []struct {
		name      string
		got, want int
	}{
		{"Service targetPort is Envoy's listener", containerPort(t, envoyC, at(k.object(t, "Service/"+name), "spec", "ports", 0, "targetPort")), a2aPort},
		{"envoy containerPort is Envoy's listener", containerPort(t, envoyC, "a2a"), a2aPort},
		{"readiness probe is capgate's admin port", containerPort(t, capgateC, at(capgateC, "readinessProbe", "httpGet", "port")), portOf(t, cfg.Listen.Admin)},
		{"liveness probe is capgate's admin port", containerPort(t, capgateC, at(capgateC, "livenessProbe", "httpGet", "port")), portOf(t, cfg.Listen.Admin)},
		{"admin port is 9090", portOf(t, cfg.Listen.Admin), 9090},
	}
	if np, ok := k.objects["NetworkPolicy/"+name]; ok {
		tests = append(tests, struct {
			name      string
			got, want int
		}{"NetworkPolicy admits Envoy's listener", num(np, "spec", "ingress", 0, "ports", 0, "port"), a2aPort})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.got)
		})
	}
	t.Run("ext_authz cluster is capgate's extauthz socket", func(t *testing.T) {
		require.Equal(t, unixPath(t, cfg.Listen.ExtAuthz), clusterSocket(t, b, "capgate_extauthz"))
	})
	t.Run("gateway cluster is capgate's a2a socket", func(t *testing.T) {
		require.Equal(t, unixPath(t, cfg.Listen.A2A), clusterSocket(t, b, "capgate_gateway"))
	})

	t.Run("probe paths", func(t *testing.T) {
		require.Equal(t, "/readyz", str(capgateC, "readinessProbe", "httpGet", "path"))
		require.Equal(t, "/healthz", str(capgateC, "livenessProbe", "httpGet", "path"))
	})
	t.Run("the agent's containers reach neither capgate's sockets nor Envoy's admin", func(t *testing.T) {
		for _, addr := range []string{cfg.Listen.A2A, cfg.Listen.ExtAuthz} {
			require.Equal(t, []string{"capgate", "envoy"}, mountedBy(dep, filepath.Dir(unixPath(t, addr))), addr)
		}
		admin := b.GetAdmin().GetAddress().GetPipe().GetPath()
		require.NotEmpty(t, admin, "Envoy's admin must be a Unix socket")
		require.Equal(t, []string{"envoy"}, mountedBy(dep, filepath.Dir(admin)))
	})
	t.Run("Envoy can connect to capgate's sockets", func(t *testing.T) {
		// capgate creates them mode 0660 (server.SocketMode); Envoy runs as another
		// user and connects as a member of the pod's fsGroup, which owns emptyDirs.
		require.NotZero(t, num(dep, "spec", "template", "spec", "securityContext", "fsGroup"))
		require.NotEqual(t, num(envoyC, "securityContext", "runAsUser"), num(capgateC, "securityContext", "runAsUser"))
		vol, _ := mountedFile(t, capgateC, filepath.Dir(unixPath(t, cfg.Listen.A2A)))
		for _, v := range list(dep, "spec", "template", "spec", "volumes") {
			if str(v, "name") == vol {
				require.NotNil(t, at(v, "emptyDir"), "volume %s must be an emptyDir", vol)
			}
		}
	})
	t.Run("streams: Envoy waits longer than capgate, capgate keeps them alive", func(t *testing.T) {
		idle := cfg.Limits.StreamIdleTimeout
		if idle == 0 {
			idle = config.DefaultStreamIdleTimeout
		}
		var route time.Duration
		for _, l := range b.GetStaticResources().GetListeners() {
			hcm := &hcmv3.HttpConnectionManager{}
			require.NoError(t, l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm))
			for _, r := range hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
				if r.GetName() == "a2a" {
					route = r.GetRoute().GetIdleTimeout().AsDuration()
				}
			}
		}
		require.Greater(t, route, idle, "Envoy's a2a route idle_timeout must exceed capgate's limits.stream_idle_timeout")
		require.Positive(t, cfg.Limits.StreamKeepAlive, "capgate.yaml: limits.stream_keepalive")
		require.LessOrEqual(t, 4*cfg.Limits.StreamKeepAlive, route, "several keep-alives per Envoy idle period")
	})
	t.Run("shutdown: Envoy drains first, capgate and the agent outlive it", func(t *testing.T) {
		script := str(envoyC, "lifecycle", "preStop", "exec", "command", 2)
		require.Contains(t, script, "POST /drain_listeners?graceful&skip_exit ")
		require.Contains(t, script, `"`+b.GetAdmin().GetAddress().GetPipe().GetPath()+`"`, "the drain goes to the bootstrap's admin socket")
		envoySleep := preStopSleep(t, envoyC)
		drain, err := strconv.Atoi(flagValue(t, envoyC, "--drain-time-s"))
		require.NoError(t, err)
		require.Less(t, drain, envoySleep, "listeners close before Envoy is stopped")
		require.Equal(t, "immediate", flagValue(t, envoyC, "--drain-strategy"))
		// capgate and every other container (the agent's) serve Envoy until it has exited.
		for _, c := range list(dep, "spec", "template", "spec", "containers") {
			if str(c, "name") != "envoy" {
				require.Greater(t, preStopSleep(t, c.(obj)), envoySleep, "container %s must outlive Envoy's drain", str(c, "name"))
			}
		}
		shutdown, err := time.ParseDuration(flagValue(t, capgateC, "--shutdown-timeout"))
		require.NoError(t, err)
		grace := time.Duration(num(dep, "spec", "template", "spec", "terminationGracePeriodSeconds")) * time.Second
		require.Greater(t, grace, time.Duration(preStopSleep(t, capgateC))*time.Second+shutdown,
			"terminationGracePeriodSeconds must cover capgate's preStop and its own drain")
	})
	t.Run("Envoy's heap budget fits its container", func(t *testing.T) {
		var heap uint64
		for _, m := range b.GetOverloadManager().GetResourceMonitors() {
			fh := &fixedheapv3.FixedHeapConfig{}
			if m.GetTypedConfig().UnmarshalTo(fh) == nil {
				heap = fh.GetMaxHeapSizeBytes()
			}
		}
		limit := quantityBytes(t, str(envoyC, "resources", "limits", "memory"))
		require.Positive(t, heap)
		require.LessOrEqual(t, heap, limit*4/5, "fixed_heap max_heap_size_bytes leaves at least 20%% of the %d-byte limit for what the heap monitor does not count", limit)
	})
	// The manifests capgate reads: the files the container sees under each
	// folder capgate.yaml names, relative to its own folder.
	manifests := map[string]string{}
	for _, dir := range cfg.Manifests {
		abs := filepath.Join(filepath.Dir(cargs[j+1].(string)), dir)
		vol, rel := mountedFile(t, capgateC, abs)
		for p, content := range volumeFiles(t, k, dep, vol) {
			if r, err := filepath.Rel(rel, p); err == nil && !strings.HasPrefix(r, "..") {
				manifests[filepath.Join(abs, r)] = content
			}
		}
	}
	t.Run("manifests are mounted", func(t *testing.T) {
		require.NotEmpty(t, cfg.Manifests)
		require.NotEmpty(t, manifests, "no manifests mounted under %v", cfg.Manifests)
	})
	t.Run("every manifest's handler is configured", func(t *testing.T) {
		for p, content := range manifests {
			m := parseDocs(t, p, []byte(content))
			require.NotEmpty(t, m, p)
			require.Contains(t, cfg.Handlers, str(m[0], "handler"), "%s: handler not in capgate.yaml handlers", p)
		}
	})
}

func TestIstio(t *testing.T) {
	var mesh, policy obj
	services := map[string]obj{}
	entries := map[string]obj{} // ServiceEntry by host
	for _, f := range []string{"mesh-config.yaml", "authorization-policy.yaml", "service.yaml", "service-entry.yaml"} {
		for _, d := range readDocs(t, filepath.Join("istio", f)) {
			switch str(d, "kind") {
			case "IstioOperator":
				mesh = d
			case "AuthorizationPolicy":
				policy = d
			case "Service":
				services[str(d, "metadata", "name")+"."+str(d, "metadata", "namespace")+".svc.cluster.local"] = d
			case "ServiceEntry":
				for _, h := range list(d, "spec", "hosts") {
					entries[h.(string)] = d
				}
			}
		}
	}
	require.NotNil(t, mesh)
	require.NotNil(t, policy)
	// capgate's ext_authz in the agent pod keeps its default address: loopback.
	extauthzPort := portOf(t, config.DefaultListenExtAuthz)
	host, _, err := net.SplitHostPort(config.DefaultListenExtAuthz)
	require.NoError(t, err)
	require.True(t, net.ParseIP(host).IsLoopback())

	require.Equal(t, "CUSTOM", str(policy, "spec", "action"))
	var provider obj
	for _, p := range list(mesh, "spec", "meshConfig", "extensionProviders") {
		if str(p, "name") == str(policy, "spec", "provider", "name") {
			provider = p.(obj)
		}
	}
	require.NotNil(t, provider, "AuthorizationPolicy provider %q is not a meshConfig extensionProvider", str(policy, "spec", "provider", "name"))
	grpc := at(provider, "envoyExtAuthzGrpc")
	require.NotNil(t, grpc, "the provider must be envoyExtAuthzGrpc")

	se, ok := entries[str(grpc, "service")]
	require.True(t, ok, "provider service %q is not a host of istio/service-entry.yaml: a Kubernetes Service would send checks to other pods", str(grpc, "service"))
	require.Equal(t, str(policy, "metadata", "namespace"), str(se, "metadata", "namespace"))
	agentSvc := services["finance-agent.finance-agent.svc.cluster.local"]
	require.NotNil(t, agentSvc)

	tests := []struct {
		name      string
		got, want any
	}{
		{"provider port is the ServiceEntry's", num(grpc, "port"), num(se, "spec", "ports", 0, "number")},
		{"provider port is capgate's extauthz port", num(grpc, "port"), extauthzPort},
		{"ServiceEntry speaks gRPC", str(se, "spec", "ports", 0, "protocol"), "GRPC"},
		{"ServiceEntry resolves to fixed addresses", str(se, "spec", "resolution"), "STATIC"},
		{"ServiceEntry's only endpoint is the pod's own loopback", list(se, "spec", "endpoints"), []any{obj{"address": "127.0.0.1"}}},
		{"fails closed", at(grpc, "failOpen"), false},
		{"whole body", at(grpc, "includeRequestBodyInCheck", "allowPartialMessage"), false},
		{"body as bytes", at(grpc, "includeRequestBodyInCheck", "packAsBytes"), true},
		{"body up to 1 MiB", num(grpc, "includeRequestBodyInCheck", "maxRequestBytes") >= MinRequestBodyBytes, true},
		{"policy selects the agent", str(policy, "spec", "selector", "matchLabels", "app.kubernetes.io/name"), str(agentSvc, "spec", "selector", "app.kubernetes.io/name")},
		{"only the card paths skip the check", list(policy, "spec", "rules", 0, "to", 0, "operation", "notPaths"), []any{PublicCardPath, PublicCardPathV03}},
		{"POST to the card paths is checked", list(policy, "spec", "rules", 1, "to", 0, "operation", "paths"), []any{PublicCardPath, PublicCardPathV03}},
		{"POST to the card is checked", list(policy, "spec", "rules", 1, "to", 0, "operation", "notMethods"), []any{"GET", "HEAD"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.got)
		})
	}
	t.Run("no Service exposes capgate's ext_authz", func(t *testing.T) {
		for name, svc := range services {
			for _, p := range list(svc, "spec", "ports") {
				require.NotEqual(t, extauthzPort, num(p, "port"), name)
				require.NotEqual(t, extauthzPort, num(p, "targetPort"), name)
			}
		}
	})
	t.Run("ext_authz's own port is not checked (no recursion)", func(t *testing.T) {
		for _, r := range list(policy, "spec", "rules") {
			ports := list(r, "to", 0, "operation", "ports")
			require.NotEmpty(t, ports, "a rule without ports would also check capgate's ext_authz port")
			require.NotContains(t, ports, strconv.Itoa(num(grpc, "port")))
		}
	})
}

// TestEnvoyPreStopDrain runs the envoy container's preStop script (without
// its sleep) against a stand-in for Envoy's admin API on a Unix socket: it
// must POST /drain_listeners?graceful&skip_exit there and fail when the
// drain is not acknowledged. The envoy image has perl but no curl.
func TestEnvoyPreStopDrain(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl is not installed here; the envoy image has it")
	}
	k := loadKustomization(t, "kubernetes")
	envoyC := container(t, k.object(t, "Deployment/finance-agent"), "envoy")
	cmd := list(envoyC, "lifecycle", "preStop", "exec", "command")
	require.Equal(t, []any{"/bin/sh", "-c"}, cmd[:2])
	b, err := DefaultBootstrap()
	require.NoError(t, err)
	adminPath := b.GetAdmin().GetAddress().GetPipe().GetPath()

	tests := []struct {
		name     string
		status   int // 0: nothing listens
		wantExit int
	}{
		{"drain acknowledged", http.StatusOK, 0},
		{"drain refused", http.StatusBadRequest, 1},
		{"admin socket absent", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "admin.sock")
			script := strings.ReplaceAll(cmd[2].(string), `"`+adminPath+`"`, `"`+sock+`"`)
			script = regexp.MustCompile(`(?m)^sleep \d+$`).ReplaceAllString(script, "")
			require.NotContains(t, script, adminPath)

			var mu sync.Mutex
			var got []string
			if tt.status != 0 {
				ln, err := net.Listen("unix", sock)
				require.NoError(t, err)
				srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					got = append(got, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
					mu.Unlock()
					w.WriteHeader(tt.status)
					_, _ = io.WriteString(w, "OK\n")
				})}
				go func() { _ = srv.Serve(ln) }()
				t.Cleanup(func() { _ = srv.Close() })
			}
			run := exec.CommandContext(t.Context(), "/bin/sh", "-c", script)
			out, err := run.CombinedOutput()
			require.Equal(t, tt.wantExit, run.ProcessState.ExitCode(), "%s %v", out, err)
			mu.Lock()
			defer mu.Unlock()
			if tt.status != 0 {
				require.Equal(t, []string{"POST /drain_listeners?graceful&skip_exit"}, got)
			}
		})
	}
}
