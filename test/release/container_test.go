package release

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/test/testutil"
)

// chartRender is the Helm chart's render of the finance example: the pod the
// container test runs capgate's container of.
const chartRender = "envoy/kubernetes/finance-agent.yaml"

// chartPod is what the chart gives capgate's container: its args and
// security context, and the files of its /etc/capgate volume (path ->
// content; the admin token's Secret is left to the test).
type chartPod struct {
	args              []string
	runAsUser         int
	runAsGroup        int
	readOnlyRoot      bool
	noPrivEscalation  bool
	dropsAll          bool
	configFiles       map[string]string
	secretPaths       []string
	tmpfs             []string // emptyDir mounts
	configMount       string
	capgateConfigPath string
}

// readChartPod reads capgate's container out of the chart's render.
func readChartPod(t *testing.T) chartPod {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), chartRender))
	require.NoError(t, err)
	type obj = map[string]any
	configMaps := map[string]obj{}
	var dep obj
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d obj
		if err := dec.Decode(&d); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		switch d["kind"] {
		case "ConfigMap":
			configMaps[d["metadata"].(obj)["name"].(string)] = d["data"].(obj)
		case "Deployment":
			dep = d
		}
	}
	require.NotNil(t, dep)
	spec := dep["spec"].(obj)["template"].(obj)["spec"].(obj)
	var c obj
	for _, x := range spec["containers"].([]any) {
		if x.(obj)["name"] == "capgate" {
			c = x.(obj)
		}
	}
	require.NotNil(t, c, "no capgate container in %s", chartRender)
	p := chartPod{configFiles: map[string]string{}}
	for _, a := range c["args"].([]any) {
		p.args = append(p.args, a.(string))
	}
	sc := c["securityContext"].(obj)
	p.runAsUser, p.runAsGroup = sc["runAsUser"].(int), sc["runAsGroup"].(int)
	p.readOnlyRoot = sc["readOnlyRootFilesystem"] == true
	p.noPrivEscalation = sc["allowPrivilegeEscalation"] == false
	p.dropsAll = fmt.Sprint(sc["capabilities"].(obj)["drop"]) == "[ALL]"
	volumes := map[string]obj{}
	for _, v := range spec["volumes"].([]any) {
		volumes[v.(obj)["name"].(string)] = v.(obj)
	}
	for _, m := range c["volumeMounts"].([]any) {
		m := m.(obj)
		v := volumes[m["name"].(string)]
		switch {
		case v["emptyDir"] != nil:
			p.tmpfs = append(p.tmpfs, m["mountPath"].(string))
		case v["projected"] != nil:
			p.configMount = m["mountPath"].(string)
			for _, s := range v["projected"].(obj)["sources"].([]any) {
				s := s.(obj)
				if cm, ok := s["configMap"].(obj); ok {
					for _, it := range cm["items"].([]any) {
						it := it.(obj)
						p.configFiles[it["path"].(string)] = configMaps[cm["name"].(string)][it["key"].(string)].(string)
					}
				}
				if sec, ok := s["secret"].(obj); ok {
					for _, it := range sec["items"].([]any) {
						p.secretPaths = append(p.secretPaths, it.(obj)["path"].(string))
					}
				}
			}
		}
	}
	for i, a := range p.args {
		if a == "--config" {
			p.capgateConfigPath = p.args[i+1]
		}
	}
	return p
}

// checkContainer runs the image as the chart runs capgate's container —
// read-only root, the chart's non-root user, no capabilities, no privilege
// escalation, /etc/capgate mounted read-only with the files the chart
// projects there (its capgate.yaml and manifests, an admin token), emptyDirs
// as tmpfs — under podman with runc, and sends it a message the router
// routes. Two edits stand in for the rest of the pod: the gateway and admin
// listen on loopback ports (flags; the ext_authz socket stays where the chart
// puts it), the handlers are capgate's builtin echo (the agent container),
// and the issuer is the finance example's demo issuer (a token the test can
// mint).
func checkContainer(t *testing.T, podman, ref string) {
	runc := "/usr/sbin/runc" // Debian's, outside a non-root user's PATH
	if _, err := os.Stat(runc); err != nil {
		runc = need(t, "runc", "runc")
	}
	pod := readChartPod(t)
	require.True(t, pod.readOnlyRoot && pod.noPrivEscalation && pod.dropsAll, "the chart hardens capgate's container")
	require.Equal(t, "/etc/capgate", pod.configMount)
	require.Equal(t, filepath.Join(pod.configMount, "capgate.yaml"), pod.capgateConfigPath)

	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755)) //nolint:gosec // the container's user reads it
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(pod.configFiles["capgate.yaml"]), &cfg))
	var finance map[string]any
	fb, err := os.ReadFile(filepath.Join(repoRoot(t), "manifests", "finance", "capgate.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(fb, &finance))
	cfg["auth"] = finance["auth"]
	for h := range cfg["handlers"].(map[string]any) {
		cfg["handlers"].(map[string]any)[h] = "builtin:echo"
	}
	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	pod.configFiles["capgate.yaml"] = string(out)
	jwks, err := os.ReadFile(filepath.Join(repoRoot(t), "manifests", "finance", "keys", "demo.jwks.json"))
	require.NoError(t, err)
	pod.configFiles["keys/demo.jwks.json"] = string(jwks)
	for _, p := range pod.secretPaths {
		pod.configFiles[p] = strings.Repeat("0123456789abcdef", 4)
	}
	for p, content := range pod.configFiles {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o444))
	}

	conf := filepath.Join(t.TempDir(), "containers.conf")
	// podman's default ulimits cannot be set on these machines.
	require.NoError(t, os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\n"), 0o644))
	name := fmt.Sprintf("capgate-releasetest-%d-%d", os.Getpid(), time.Now().UnixNano())
	args := []string{"run", "--rm", "--name", name, "--runtime", runc, "--network", "host",
		"--read-only", "--user", fmt.Sprintf("%d:%d", pod.runAsUser, pod.runAsGroup),
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"-v", dir + ":" + pod.configMount + ":ro"}
	for _, m := range pod.tmpfs {
		args = append(args, "--tmpfs", m)
	}
	args = append(append(args, ref), pod.args...)
	args = append(args, "--listen-gateway", "127.0.0.1:0", "--listen-admin", "127.0.0.1:0")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, podman, args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	// podman writes stderr while the container runs: read it through a lock, and only to
	// explain a failure.
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = exec.Command(podman, "stop", "--time", "5", name).Run()
		_ = cmd.Wait()
	})
	addrs := make(chan map[string]string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		got := map[string]string{}
		for sc.Scan() {
			var line struct{ Msg, Server, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch line.Msg {
			case "listening":
				got[line.Server] = line.Addr
			case "capgate serving":
				addrs <- got
			}
		}
		close(addrs)
	}()
	var got map[string]string
	select {
	case got = <-addrs:
	case <-ctx.Done():
	}
	if got["gateway"] == "" {
		t.Fatalf("capgate in the container did not serve: %s", stderr.String())
	}
	require.Equal(t, "/var/run/capgate/extauthz.sock", got["extauthz"], "ext_authz stays on the chart's socket")

	resp, err := http.Get("http://" + got["admin"] + "/readyz") //nolint:noctx // bounded by the client's default transport and the test
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// A message naming no skill: the router picks the capability.
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-container-1","role":"ROLE_USER",` +
		`"parts":[{"text":"What is the status of invoice INV-20931?"}]}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+got["gateway"]+"/", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+testutil.Token(t, testutil.PublicCaller()))
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var rpc struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(b, &rpc), "%s", b)
	require.Empty(t, rpc.Error, "%s", b)
	require.NotEmpty(t, rpc.Result, "%s", b)
	require.Contains(t, string(rpc.Result), `"capability":"lookup-invoice"`, "the router routed the message to lookup-invoice, and its handler answered")
}

// lockedBuffer is a bytes.Buffer written by one goroutine (os/exec's copy of a child's output)
// and read by another.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
