package regocheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-policy-agent/opa/v1/format"
)

// FormatSource returns src formatted as `opa fmt` would write it.
func FormatSource(file, src string) ([]byte, error) {
	return format.SourceWithOpts(file, []byte(src), formatOpts())
}

// ReadDir reads every .rego file under dir (tests included), keyed by path.
func ReadDir(dir string) (map[string]string, error) {
	mods := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".rego") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		mods[p] = string(b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read policy modules: %w", err)
	}
	if len(mods) == 0 {
		return nil, fmt.Errorf("no .rego files under %s", dir)
	}
	return mods, nil
}
