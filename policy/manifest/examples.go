package manifest

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"
)

// Bounds of a routing examples file (routing.examples_file).
const (
	MaxRoutingExamples     = 1000
	MaxRoutingExampleBytes = 1024
)

// ExamplesFileExt is the extension a routing examples file must have: not a
// manifest's, so that Load never reads it as one, and one the reloader
// watches (IsManifestFile).
const ExamplesFileExt = ".examples.txt"

// examplesFileProblem checks the form of routing.examples_file: a relative
// slash path inside the manifests folder ending in .examples.txt.
func examplesFileProblem(p string) string {
	switch {
	case strings.TrimSpace(p) == "":
		return "want a file name, e.g. cancel-booking.examples.txt"
	case strings.HasPrefix(p, "/") || strings.Contains(p, `\`):
		return fmt.Sprintf("%q must be a relative slash path inside the manifests folder", p)
	case !IsExamplesFile(p):
		return fmt.Sprintf("%q must end in %s (one example per line)", p, ExamplesFileExt)
	}
	return ""
}

// IsExamplesFile reports whether p has a routing examples file's name
// (ending in .examples.txt, any case).
func IsExamplesFile(p string) bool {
	return len(p) >= len(ExamplesFileExt) && strings.EqualFold(p[len(p)-len(ExamplesFileExt):], ExamplesFileExt)
}

// ExamplesPath is where the examples file of a manifest read from file
// (relative to its Dir) is, relative to the same Dir; ok is false when it
// would leave the folder.
func ExamplesPath(manifestFile, examplesFile string) (string, bool) {
	p := path.Join(path.Dir(manifestFile), examplesFile)
	return p, fs.ValidPath(p)
}

// ParseExamples reads a routing examples file: one example per line, blank
// lines and lines starting with # ignored, surrounding white space trimmed.
// Problems name the file (display name) and line.
func ParseExamples(file string, data []byte) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 256), MaxRoutingExampleBytes+2)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if !utf8.ValidString(t) {
			return nil, fmt.Errorf("%s:%d: not UTF-8 text", file, line)
		}
		if len(out) == MaxRoutingExamples {
			return nil, fmt.Errorf("%s:%d: more than %d examples", file, line, MaxRoutingExamples)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: a line longer than %d bytes", file, line+1, MaxRoutingExampleBytes)
	}
	return out, nil
}
