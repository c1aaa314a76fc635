package cli

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"strings"
	"testing/fstest"
	"time"

	"github.com/capgate/capgate/policy/access"
	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/sidecar/settings"
)

func runAccess(ctx context.Context, env Env, args []string) error {
	if len(args) == 0 {
		return usageErr("usage: capgate access matrix|diff|check|replay [flags]")
	}
	switch args[0] {
	case "matrix":
		return runAccessMatrix(ctx, env, args[1:])
	case "diff":
		return runAccessDiff(ctx, env, args[1:])
	case "check":
		return runAccessCheck(ctx, env, args[1:])
	case "replay":
		return runAccessReplay(ctx, env, args[1:])
	}
	return usageErr("unknown access command %q (want matrix, diff, check or replay)", args[0])
}

// accessFlags are the flags matrix and diff share.
type accessFlags struct {
	callers            *string
	asJSON, asMarkdown *bool
	html               *string
}

func addAccessFlags(fs *flag.FlagSet) accessFlags {
	return accessFlags{
		callers:    fs.String("callers", "", "caller classes: a YAML file of named claim sets (default: derived from the registry, see docs/policy.md)"),
		asJSON:     fs.Bool("json", false, "print JSON"),
		asMarkdown: fs.Bool("markdown", false, "print Markdown"),
		html:       fs.String("html", "", "write a self-contained HTML report to this file (stdout then says only where, unless --json or --markdown)"),
	}
}

// provenance is the header of a report made now by this capgate from
// config.
func provenance(config string) access.Provenance {
	version, commit, _ := buildVersion()
	if config == "" {
		config = "(the embedded finance example)"
	}
	return access.Provenance{GeneratedAt: time.Now(), Version: version, Commit: commit, Config: config}
}

func (f accessFlags) check() error {
	if *f.asJSON && *f.asMarkdown {
		return usageErr("--json and --markdown exclude each other")
	}
	return nil
}

// write prints in the chosen format and writes the HTML report if asked.
func (f accessFlags) write(env Env, text, markdown, asJSON, html func(io.Writer) error) error {
	out := text
	switch {
	case *f.asJSON:
		out = asJSON
	case *f.asMarkdown:
		out = markdown
	case *f.html != "":
		out = nil // quiet: the report is the file
	}
	if out != nil {
		if err := out(env.Stdout); err != nil {
			return err
		}
	}
	if *f.html == "" {
		return nil
	}
	file, err := os.Create(*f.html)
	if err != nil {
		return usageErr("create HTML report: %v", err)
	}
	w := bufio.NewWriter(file)
	if err := errors.Join(html(w), w.Flush(), file.Close()); err != nil {
		return usageErr("write HTML report: %v", err)
	}
	if out == nil {
		_, err = fmt.Fprintf(env.Stdout, "wrote the HTML report to %s\n", *f.html)
	}
	return err
}

func runAccessMatrix(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "access matrix", "access matrix [--config capgate.yaml] [--callers callers.yaml] [--capability ID]... [--caller CLASS]... [--json|--markdown] [--html report.html]")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example)")
	var capIDs, callerNames listFlag
	fs.Var(&capIDs, "capability", "only this capability (who can see or run it?); repeatable")
	fs.Var(&callerNames, "caller", "only this caller class (what can it see or run?); repeatable")
	f := addAccessFlags(fs)
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	d, err := loadDeployment(*cfgPath)
	if err != nil {
		return err
	}
	s := side{snap: d.Snapshot, auth: d.Config.Auth}
	classes, err := reviewClasses(*f.callers, s)
	if err != nil {
		return err
	}
	m, err := s.matrix(ctx, classes)
	if err != nil {
		return err
	}
	if m, err = m.Select(callerNames, capIDs); err != nil {
		return usageErr("%v", err)
	}
	s.addAuth(m)
	m.Provenance = provenance(*cfgPath)
	return f.write(env,
		func(w io.Writer) error { return access.WriteText(w, m) },
		func(w io.Writer) error { return access.WriteMarkdown(w, m) },
		func(w io.Writer) error { return access.WriteJSON(w, m) },
		func(w io.Writer) error { return access.WriteHTML(w, m) })
}

func runAccessDiff(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "access diff", "access diff --base SOURCE --head SOURCE [--config capgate.yaml] [--callers callers.yaml] [--allow-gain] [--json|--markdown] [--html report.html]\n"+
		"SOURCE: a deployment config, an OPA bundle built by `capgate compile`, or git:REV[:path/to/capgate.yaml] of the repository in the working directory")
	baseSpec := fs.String("base", "", "the deployment before the change")
	headSpec := fs.String("head", "", "the deployment after the change")
	cfgPath := fs.String("config", "", "for bundle sources: the config whose claim names read the callers file (default: the embedded finance example)")
	allowGain := fs.Bool("allow-gain", false, "exit 0 even when a caller gains access or a guard of how a skill runs is loosened")
	f := addAccessFlags(fs)
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	if *baseSpec == "" || *headSpec == "" {
		return usageErr("--base and --head are required")
	}
	var runtime *config.Config
	loadRuntime := func() (config.Auth, error) {
		if runtime == nil {
			d, err := loadDeployment(*cfgPath)
			if err != nil {
				return config.Auth{}, err
			}
			runtime = d.Config
		}
		return runtime.Auth, nil
	}
	base, err := loadSide(ctx, *baseSpec, loadRuntime)
	if err != nil {
		return err
	}
	head, err := loadSide(ctx, *headSpec, loadRuntime)
	if err != nil {
		return err
	}
	// Both sides are asked about the same callers: derived from both
	// registries, or the callers file read with each side's claim names.
	baseClasses, err := reviewClasses(*f.callers, base, head)
	if err != nil {
		return err
	}
	headClasses, err := reviewClasses(*f.callers, head, base)
	if err != nil {
		return err
	}
	bm, err := base.matrix(ctx, baseClasses)
	if err != nil {
		return err
	}
	hm, err := head.matrix(ctx, headClasses)
	if err != nil {
		return err
	}
	base.addAuth(bm)
	head.addAuth(hm)
	d, err := access.Compare(bm, hm)
	if err != nil {
		return err
	}
	d.BaseName, d.HeadName = *baseSpec, *headSpec
	d.Provenance = provenance(*headSpec)
	if err := f.write(env,
		func(w io.Writer) error { return access.WriteDiffText(w, d) },
		func(w io.Writer) error { return access.WriteDiffMarkdown(w, d) },
		func(w io.Writer) error { return access.WriteDiffJSON(w, d) },
		func(w io.Writer) error { return access.WriteDiffHTML(w, bm, hm, d) }); err != nil {
		return err
	}
	if d.Risky() && !*allowGain {
		if len(d.Guards) == 0 {
			return checkFailed("%d cell(s) gained access: review them, then pass --allow-gain", len(d.Gained))
		}
		return checkFailed("%d cell(s) gained access, %d guard(s) of how a skill runs loosened: review them, then pass --allow-gain", len(d.Gained), len(d.Guards))
	}
	return nil
}

// side is one deployment under review: its snapshot and the claim names
// its callers' tokens are read with.
type side struct {
	snap   *compile.Snapshot
	auth   config.Auth
	bundle bool // auth is borrowed from --config: not the side's own
}

// addAuth adds the side's own auth fields to the matrix's facts.
func (s side) addAuth(m *access.Matrix) {
	if !s.bundle {
		m.Facts.AddAuth(s.auth)
	}
}

func (s side) matrix(ctx context.Context, classes []access.Class) (*access.Matrix, error) {
	e, err := engine.New(ctx, s.snap)
	if err != nil {
		return nil, fmt.Errorf("prepare policy: %w", err)
	}
	return access.Build(ctx, e, classes)
}

// reviewClasses reads the callers file with s's claim names, or derives
// the classes from s and the other sides' registries.
func reviewClasses(callersPath string, s side, others ...side) ([]access.Class, error) {
	if callersPath == "" {
		snaps := []*compile.Snapshot{s.snap}
		for _, o := range others {
			snaps = append(snaps, o.snap)
		}
		return access.Derive(snaps...), nil
	}
	b, err := os.ReadFile(callersPath)
	if err != nil {
		return nil, usageErr("read callers: %v", err)
	}
	specs, err := access.ParseCallers(b)
	if err != nil {
		return nil, usageErr("%s: %v", callersPath, err)
	}
	return access.Classes(specs, func(claims map[string]any) engine.Caller { return callerFor(s.auth, claims) }), nil
}

// gitPrefix marks a source read from a git revision of the working
// repository.
const gitPrefix = "git:"

// loadSide loads one side of a diff: git:REV[:path], an OPA bundle (a
// gzip file), or a deployment config. A bundle carries no claim names:
// runtimeAuth gives them.
func loadSide(ctx context.Context, spec string, runtimeAuth func() (config.Auth, error)) (side, error) {
	if rest, ok := strings.CutPrefix(spec, gitPrefix); ok {
		return loadGitSide(ctx, rest)
	}
	b, err := os.ReadFile(spec)
	if err != nil {
		return side{}, usageErr("read %s: %v", spec, err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) { // not gzip: a config
		d, err := loadDeployment(spec)
		if err != nil {
			return side{}, err
		}
		return side{snap: d.Snapshot, auth: d.Config.Auth}, nil
	}
	snap, err := compile.ReadBundle(bytes.NewReader(b), compile.VerifyOptions{})
	if err != nil {
		return side{}, usageErr("%s: %v", spec, err)
	}
	auth, err := runtimeAuth()
	if err != nil {
		return side{}, err
	}
	return side{snap: snap, auth: auth, bundle: true}, nil
}

// maxGitTree bounds what is read from `git archive`.
const maxGitTree = 256 << 20

// loadGitSide loads the deployment at path (default capgate.yaml, relative
// to the repository root) as of revision rev: the tree is read with `git
// archive` into memory and the config loaded from it, so paths it names
// resolve inside that tree. Symbolic links are not followed.
func loadGitSide(ctx context.Context, spec string) (side, error) {
	rev, cfgPath, named := strings.Cut(spec, ":")
	if cfgPath == "" {
		cfgPath = "capgate.yaml"
	}
	if rev == "" || strings.HasPrefix(rev, "-") {
		return side{}, usageErr("git:%s: want git:REV[:path/to/capgate.yaml], a revision of the repository in the working directory and the config's path in it", spec)
	}
	cfgPath = path.Clean(strings.TrimPrefix(cfgPath, "/"))
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", "archive", "--format=tar", rev)
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return side{}, usageErr("git archive %s: %v", rev, err)
	}
	if err := cmd.Start(); err != nil {
		return side{}, usageErr("git archive %s: %v", rev, err)
	}
	tree, readErr := readTar(io.LimitReader(out, maxGitTree+1))
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return side{}, usageErr("git archive %s: %v: %s", rev, err, strings.TrimSpace(stderr.String()))
	}
	if readErr != nil {
		return side{}, usageErr("git archive %s: %v", rev, readErr)
	}
	if _, ok := tree[cfgPath]; !ok {
		if !named {
			return side{}, usageErr("git:%s: no path given, and the default capgate.yaml is not at the root of %s's tree: "+
				"name the config, git:%s:path/to/capgate.yaml (relative to the repository root)", spec, rev, rev)
		}
		return side{}, usageErr("git:%s: %s is not in %s's tree: the path is relative to the repository root (git:%s:path/to/capgate.yaml), "+
			"and the file must be committed in that revision", spec, cfgPath, rev, rev)
	}
	cfg, err := config.LoadFS(tree, cfgPath, settings.Checks()...)
	if err != nil {
		return side{}, usageErr("git:%s: %v", spec, err)
	}
	d, err := deployment.FromConfig(cfg)
	if err != nil {
		return side{}, usageErr("git:%s: invalid deployment:\n%v", spec, err)
	}
	return side{snap: d.Snapshot, auth: d.Config.Auth}, nil
}

// readTar reads the regular files of a tar stream into an in-memory file
// system (fstest.MapFS: a read-only map of paths to contents).
func readTar(r io.Reader) (fstest.MapFS, error) {
	tree := fstest.MapFS{}
	tr := tar.NewReader(r)
	total := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tree, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean(h.Name)
		if !fs.ValidPath(name) {
			return nil, fmt.Errorf("unexpected path %q in the archive", h.Name)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		if total += len(b); total > maxGitTree {
			return nil, fmt.Errorf("tree larger than %d bytes", maxGitTree)
		}
		tree[name] = &fstest.MapFile{Data: b, Mode: 0o644}
	}
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}
