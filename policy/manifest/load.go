package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/diag/yamlnode"
)

// Dir is one folder of manifests.
type Dir struct {
	FS   fs.FS  // rooted at the folder
	Name string // display path used in messages, e.g. "capabilities"
}

// Options tune registry validation.
type Options struct {
	// Handlers reports whether the deployment defines a handler name.
	// Nil skips the check.
	Handlers func(name string) bool
}

// manifestExts are the file extensions Load reads.
var manifestExts = []string{".yaml", ".yml", ".json"}

// Load reads every .yaml, .yml and .json file below each dir (recursively,
// in lexical order; names starting with "." are skipped), one manifest per
// file, and validates them as one registry. Every problem found is returned
// at once as a *diag.Set; a registry that fails validation is never returned.
func Load(dirs []Dir, opts Options) (*Registry, error) {
	var probs diag.Set
	var all []parsed
	s := newSession()
	for _, dir := range dirs {
		all = loadDir(all, dir, &probs, s)
	}
	return finish(all, opts, &probs, s)
}

// loadDir appends the manifests of dir to out.
func loadDir(out []parsed, dir Dir, probs *diag.Set, s *session) []parsed {
	if dir.FS == nil {
		probs.Add(dir.Name, 0, "", "no filesystem to read")
		return out
	}
	err := fs.WalkDir(dir.FS, ".", func(p string, e fs.DirEntry, err error) error {
		file := path.Join(dir.Name, p)
		if err != nil {
			probs.Add(file, 0, "", "cannot read: %s", pathErr(err))
			if e != nil && e.IsDir() && p != "." {
				return fs.SkipDir
			}
			return nil
		}
		if p != "." && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if e.IsDir() || !isManifestFile(p) {
			return nil
		}
		data, err := fs.ReadFile(dir.FS, p)
		if err != nil {
			probs.Add(file, 0, "", "cannot read: %s", pathErr(err))
			return nil
		}
		if n := yamlnode.Parse(file, data, probs); n != nil {
			c := decodeCapability(file, "", n, probs, s)
			c.cap.RoutingExamples = readExamples(dir, p, file, c.cap.Routing.ExamplesFile, probs, &s.warnings)
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		probs.Add(dir.Name, 0, "", "cannot read: %s", pathErr(err))
	}
	return out
}

// readExamples reads the routing examples file ref (routing.examples_file) of
// the manifest at p in dir ("": none). A file that does not exist yet is no
// examples and a warning (`capgate route examples accept` creates it); one
// that cannot be read or parsed is a problem.
func readExamples(dir Dir, p, file, ref string, probs, warnings *diag.Set) []string {
	if ref == "" {
		return nil
	}
	ep, ok := ExamplesPath(p, ref)
	if !ok {
		probs.Add(file, 0, "routing.examples_file", "%q leaves the manifests folder", ref)
		return nil
	}
	data, err := fs.ReadFile(dir.FS, ep)
	if errors.Is(err, fs.ErrNotExist) {
		warnings.Add(file, 0, "routing.examples_file", "%s does not exist yet: no learned examples (capgate route examples accept creates it)", path.Join(dir.Name, ep))
		return nil
	}
	if err != nil {
		probs.Add(file, 0, "routing.examples_file", "cannot read %s: %s", path.Join(dir.Name, ep), pathErr(err))
		return nil
	}
	ex, err := ParseExamples(path.Join(dir.Name, ep), data)
	if err != nil {
		probs.Add(file, 0, "routing.examples_file", "%v", err)
		return nil
	}
	return ex
}

// IsManifestFile reports whether Load may read the file at path p: a
// manifest file extension, or a routing examples file's (.examples.txt), and no
// dot-named file or folder on the way (the reloader reacts to changes of
// these files only).
func IsManifestFile(p string) bool {
	for _, seg := range strings.Split(filepath.ToSlash(p), "/") {
		if strings.HasPrefix(seg, ".") && seg != "." && seg != ".." {
			return false
		}
	}
	return isManifestFile(p) || IsExamplesFile(p)
}

func isManifestFile(p string) bool {
	ext := strings.ToLower(path.Ext(p))
	for _, e := range manifestExts {
		if ext == e {
			return true
		}
	}
	return false
}

// pathErr drops the path from fs errors: the problem already names the file.
func pathErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Parse decodes and checks one manifest on its own (no registry-wide checks
// such as duplicate ids or replaced_by). file is the display name used in
// problems.
func Parse(file string, data []byte) (*Capability, error) {
	var probs diag.Set
	n := yamlnode.Parse(file, data, &probs)
	if n == nil {
		return nil, probs.ErrOrNil()
	}
	p := decodeCapability(file, "", n, &probs, newSession())
	if err := probs.ErrOrNil(); err != nil {
		return nil, err
	}
	return &p.cap, nil
}

// LoadJSONArray reads a JSON array of manifests (one document, name is its
// display name) and validates it as one registry, like Load. Problems name
// the array element, e.g. "manifests.json:120: [3].state: ...".
func LoadJSONArray(name string, data []byte, opts Options) (*Registry, error) {
	var probs diag.Set
	root := yamlnode.Parse(name, data, &probs)
	if root == nil {
		return nil, probs.ErrOrNil()
	}
	root = yamlnode.Resolve(root)
	if root.Kind != yaml.SequenceNode {
		probs.Add(name, root.Line, "", "want a list of capability manifests, got %s", yamlnode.KindName(root))
		return nil, probs.ErrOrNil()
	}
	all := make([]parsed, 0, len(root.Content))
	s := newSession()
	for i, n := range root.Content {
		c := decodeCapability(name, fmt.Sprintf("[%d].", i), n, &probs, s)
		if c.cap.Routing.ExamplesFile != "" {
			probs.Add(name, n.Line, fmt.Sprintf("[%d].routing.examples_file", i), "needs a manifests folder to be read from; not in a JSON array")
		}
		all = append(all, c)
	}
	return finish(all, opts, &probs, s)
}

// finish runs the registry-wide checks and builds the registry.
func finish(all []parsed, opts Options, probs *diag.Set, s *session) (*Registry, error) {
	checkRegistry(all, opts, probs)
	if err := probs.ErrOrNil(); err != nil {
		return nil, err
	}
	caps := make([]Capability, len(all))
	for i := range all {
		caps[i] = all[i].cap
	}
	r := newRegistry(caps)
	r.warnings = s.warnings.Sorted()
	return r, nil
}

// checkRegistry checks what needs every manifest: unique ids, replaced_by
// targets and handlers. A valid replaced_by is set to its target's id (the
// same string), so that the registry keeps one copy of it.
func checkRegistry(all []parsed, opts Options, probs *diag.Set) {
	byID := make(map[string]*parsed, len(all))
	for i := range all {
		p := &all[i]
		if p.cap.ID == "" {
			continue
		}
		if first, dup := byID[p.cap.ID]; dup {
			probs.Add(p.cap.Source.File, p.idLine, p.prefix+"id", "%q is already defined in %s", p.cap.ID, where(first))
			continue
		}
		byID[p.cap.ID] = p
	}
	for i := range all {
		p := &all[i]
		c := &p.cap
		if c.ReplacedBy != "" {
			var target *Capability
			if t, ok := byID[c.ReplacedBy]; ok {
				target = &t.cap
			}
			if problem := ReplacedByProblem(c, target); problem != "" {
				probs.Add(c.Source.File, p.replacedByLine, p.prefix+"replaced_by", "%s", problem)
			} else {
				c.ReplacedBy = target.ID // the same string: share it rather than keep a copy
			}
		}
		if opts.Handlers != nil && c.State != StateRemoved && c.Handler != "" && !opts.Handlers(c.Handler) {
			probs.Add(c.Source.File, p.handlerLine, p.prefix+"handler", "%q is not defined in the deployment config (handlers)", c.Handler)
		}
	}
}

// ReplacedByProblem says what is wrong with c.ReplacedBy, given the
// capability it names (nil when the registry has none), or "" when nothing
// is (or c replaces nothing). It is the one replaced_by rule: Load applies
// it with the manifest's position, and the policy compiler to registries
// that did not come through Load (bundles, tests).
func ReplacedByProblem(c, target *Capability) string {
	switch rb := c.ReplacedBy; {
	case rb == "":
		return ""
	case rb == c.ID:
		return "a capability cannot replace itself"
	case target == nil:
		return fmt.Sprintf("%q is not a capability id in this registry", rb)
	case target.State == StateRemoved:
		return fmt.Sprintf("%q is itself removed: name a capability callers can use", rb)
	}
	return ""
}

// where names a manifest's position for messages about two manifests.
func where(p *parsed) string {
	s := p.cap.Source.File
	if line := p.idLine; line > 0 {
		s = fmt.Sprintf("%s:%d", s, line)
	}
	if p.prefix != "" {
		s += " (" + strings.TrimSuffix(p.prefix, ".") + ")"
	}
	return s
}
