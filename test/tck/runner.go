package tck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	// The google/api and google/rpc descriptors the TCK's proto imports and its gRPC error
	// validator reads (ErrorInfo in google.rpc.Status), registered for GoogleDescriptors.
	_ "google.golang.org/genproto/googleapis/api/annotations"
	_ "google.golang.org/genproto/googleapis/rpc/errdetails"
	_ "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// PythonModules are the modules the TCKs import that Debian packages (SOURCE.md in the TCK
// folder): python3-pytest, -pytest-asyncio, -httpx, -grpcio, -grpc-tools, -protobuf,
// -jsonschema, -jinja2, -requests, -yaml.
var PythonModules = []string{"pytest", "pytest_asyncio", "httpx", "grpc", "grpc_tools", "google.protobuf", "jsonschema", "jinja2", "requests", "yaml"}

// FindPython returns the first interpreter that imports every PythonModules module: $PYTHON when
// set, else Debian's /usr/bin/python3, else python3 on PATH. The error names what is missing.
func FindPython(ctx context.Context) (string, error) {
	candidates := []string{"/usr/bin/python3", "python3"}
	if p := os.Getenv("PYTHON"); p != "" {
		candidates = []string{p}
	}
	var problems []string
	script := "import importlib,sys\nmissing=[]\nfor m in sys.argv[1:]:\n  try: importlib.import_module(m)\n  except Exception: missing.append(m)\nprint(' '.join(missing))"
	for _, c := range candidates {
		out, err := exec.CommandContext(ctx, c, append([]string{"-c", script}, PythonModules...)...).Output()
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", c, err))
		case strings.TrimSpace(string(out)) != "":
			problems = append(problems, fmt.Sprintf("%s lacks %s", c, strings.TrimSpace(string(out))))
		default:
			return c, nil
		}
	}
	return "", fmt.Errorf("no Python with the TCK's modules (Debian: apt-get install python3-pytest python3-pytest-asyncio python3-httpx python3-grpcio python3-grpc-tools python3-protobuf python3-jsonschema python3-jinja2 python3-requests python3-yaml): %s", strings.Join(problems, "; "))
}

// GoogleDescriptors is a FileDescriptorSet of google/api/{annotations,client,field_behavior}
// and google/rpc/{status,error_details}.proto with their imports, from Go's registry: the
// descriptors Debian does not package for Python (googleapis-common-protos).
func GoogleDescriptors() ([]byte, error) {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := range fd.Imports().Len() {
			add(fd.Imports().Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	for _, p := range []string{"google/api/annotations.proto", "google/api/client.proto", "google/api/field_behavior.proto", "google/rpc/status.proto", "google/rpc/error_details.proto"} {
		fd, err := protoregistry.GlobalFiles.FindFileByPath(p)
		if err != nil {
			return nil, err
		}
		add(fd)
	}
	return proto.Marshal(set)
}

// Suite is one TCK prepared to run: a writable copy of the snapshot (the TCK writes reports and
// caches; the snapshot stays as published) whose generated protobuf modules are regenerated for
// the Python found by FindPython.
type Suite struct {
	// Version is "1.0" or "0.3".
	Version string
	// Dir is the copy; Python the interpreter; PythonPath the folders the run needs on
	// PYTHONPATH (the generated google modules and this folder, for the tckauth plugin).
	Dir, Python string
	PythonPath  []string
	// Webhook, when set, is a listening socket the 1.0 TCK's webhook receiver serves on
	// (tckwebhook.py), so that capgate's push.allowed_urls can name its origin.
	Webhook *os.File
}

// Prepare copies the TCK at src (../shared/a2a-tck/v1.0 or v0.3) into work and regenerates its
// stubs (stubs.py, from the TCK's own compiled a2a.proto). here is this package's folder.
func Prepare(ctx context.Context, python, version, src, work, here string) (*Suite, error) {
	s := &Suite{Version: version, Dir: filepath.Join(work, "tck"), Python: python}
	if err := os.CopyFS(s.Dir, os.DirFS(src)); err != nil {
		return nil, fmt.Errorf("copy %s: %w", src, err)
	}
	if err := filepath.WalkDir(s.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	}); err != nil {
		return nil, err
	}
	stubsDir := map[string]string{"1.0": "specification/generated", "0.3": "tck/grpc_stubs"}[version]
	if stubsDir == "" {
		return nil, fmt.Errorf("unknown TCK version %q", version)
	}
	google, err := GoogleDescriptors()
	if err != nil {
		return nil, err
	}
	gen := filepath.Join(work, "gen")
	if err := os.MkdirAll(gen, 0o755); err != nil {
		return nil, err
	}
	set := filepath.Join(work, "google.pb")
	if err := os.WriteFile(set, google, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, python, filepath.Join(here, "stubs.py"), filepath.Join(s.Dir, stubsDir, "a2a_pb2.py"), set, gen)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("stubs.py: %w\n%s", err, out)
	}
	for _, f := range []string{"a2a_pb2.py", "a2a_pb2_grpc.py"} {
		b, err := os.ReadFile(filepath.Join(gen, f))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(s.Dir, stubsDir, f), b, 0o644); err != nil {
			return nil, err
		}
		if err := os.Remove(filepath.Join(gen, f)); err != nil {
			return nil, err
		}
	}
	ini := exec.CommandContext(ctx, python, filepath.Join(here, "pytestini.py"), filepath.Join(s.Dir, "pyproject.toml"), filepath.Join(s.Dir, "capgate-pytest.ini"))
	if out, err := ini.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pytestini.py: %w\n%s", err, out)
	}
	s.PythonPath = []string{gen, here}
	return s, nil
}

// Run runs pytest on the suite's tests with args (the SUT options), the tckauth plugin and a
// junit report, and returns the results. token, when set, is the bearer credential tckauth adds
// to every request. out receives pytest's output. A pytest exit status of 1 (tests failed) is
// not an error; anything else (usage, collection, internal errors) is.
func (s *Suite) Run(ctx context.Context, name, token string, out io.Writer, args ...string) ([]Result, error) {
	report := filepath.Join(s.Dir, "junit-"+strings.NewReplacer("/", "-").Replace(name)+".xml")
	// The 1.0 TCK's conformance tests (run_tck.py runs the same folder); the 0.3 TCK's mandatory
	// and capability categories (run_tck.py --category mandatory, capabilities).
	tests := map[string][]string{"1.0": {"tests/compatibility"}, "0.3": {"tests/mandatory", "tests/optional/capabilities", "--test-scope=all"}}[s.Version]
	cmdArgs := []string{"-m", "pytest"}
	cmdArgs = append(cmdArgs, tests...)
	cmdArgs = append(cmdArgs, "-c", "capgate-pytest.ini", "--rootdir=.", "-p", "tckcompat", "-p", "tckauth", "-p", "tckwebhook", "-p", "no:cacheprovider",
		"--junitxml="+report, "-o", "junit_family=xunit2", "-q", "-rN", "--tb=line", "--color=no")
	cmd := exec.CommandContext(ctx, s.Python, append(cmdArgs, args...)...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+strings.Join(append(s.PythonPath, s.Dir), string(os.PathListSeparator)),
		"PYTHONDONTWRITEBYTECODE=1", "CAPGATE_TCK_TOKEN="+token,
		// The 0.3 TCK's streaming timeout at the value its SUT requirements name as the default
		// (docs/SUT_REQUIREMENTS.md; its client's own fallback is 30 s): the agent's long-running
		// task outlives 2 × this, and an open stream is read no longer.
		"TCK_STREAMING_TIMEOUT="+fmt.Sprint(StreamingTimeout.Seconds()))
	if s.Webhook != nil {
		cmd.ExtraFiles = []*os.File{s.Webhook} // descriptor 3 in the child
		cmd.Env = append(cmd.Env, "CAPGATE_TCK_WEBHOOK_FD=3")
	}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	var exit *exec.ExitError
	if failed := errors.As(err, &exit) && exit.ExitCode() == 1; err != nil && !failed {
		return nil, fmt.Errorf("pytest (%s): %w", name, err)
	}
	f, err := os.Open(report)
	if err != nil {
		return nil, fmt.Errorf("pytest (%s) wrote no report: %w", name, err)
	}
	defer func() { _ = f.Close() }()
	return ParseJUnit(f)
}

// StreamingTimeout is TCK_STREAMING_TIMEOUT for the 0.3 TCK; agent.LongRunning is twice it.
const StreamingTimeout = 2 * time.Second

// Forwarder is a loopback TCP listener whose connections are copied byte for byte to a target:
// the harness holds its port from the start, so a config can name it before the target (a
// server that chooses its own port) runs. Close stops it and its connections.
type Forwarder struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewForwarder listens on 127.0.0.1:0; SetTarget must be called before connections arrive.
func NewForwarder() (*Forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Forwarder{ln: ln, conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.serve)
	return f, nil
}

// Addr is the listener's host:port.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

// SetTarget names the host:port connections are forwarded to.
func (f *Forwarder) SetTarget(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = addr
}

func (f *Forwarder) track(c net.Conn, add bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return false
	}
	if add {
		f.conns[c] = struct{}{}
	} else {
		delete(f.conns, c)
	}
	return true
}

func (f *Forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		target := f.target
		f.mu.Unlock()
		f.wg.Go(func() { f.pipe(c, target) })
	}
}

func (f *Forwarder) pipe(c net.Conn, target string) {
	defer func() { _ = c.Close() }()
	if target == "" {
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	if !f.track(c, true) || !f.track(up, true) {
		return
	}
	defer f.track(c, false)
	defer f.track(up, false)
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	wg.Go(func() { half(up, c) })
	half(c, up)
	wg.Wait()
}

// Close stops accepting, closes every forwarded connection and waits for the copies to end.
func (f *Forwarder) Close() error {
	err := f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
	return err
}

// Tail is the last n lines of b, for a failure message.
func Tail(b *bytes.Buffer, n int) string {
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
