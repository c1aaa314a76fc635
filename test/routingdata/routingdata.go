// Package routingdata reads the routing data shared beside the repository, as CI has it
// (../shared/data/routing: CLINC150's 150 skills as manifests and its dev cases), for the
// classifier's and the router's accuracy tests. Absent data skip those tests on a developer's
// machine and fail them under CI, where a skip would hide that the targets were not checked.
package routingdata

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/capgate/capgate/test/ci"
)

// Case is one dev case: a message and the skill it is for, nil when it is for none.
type Case struct {
	Text   string  `json:"text"`
	Expect *string `json:"expect"`
}

// Dir is the data folder, ../shared/data/routing beside the module root found from the working
// directory (a package's folder, under go test).
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(filepath.Dir(d), "shared", "data", "routing"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// Read reads manifests.json (a JSON array of capability manifests) and dev.jsonl (a Case per
// line) in dir.
func Read(dir string) (manifests []byte, cases []Case, err error) {
	if manifests, err = os.ReadFile(filepath.Join(dir, "manifests.json")); err != nil {
		return nil, nil, err
	}
	f, err := os.Open(filepath.Join(dir, "dev.jsonl"))
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var c Case
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, nil, fmt.Errorf("dev.jsonl:%d: %w", n, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return manifests, cases, nil
}

// Load is Read of Dir for a test. Data that are not there skip the test, or fail it when
// ci.Required; data that are there but unreadable fail it.
func Load(tb testing.TB) (manifests []byte, cases []Case) {
	tb.Helper()
	dir, err := Dir()
	if err == nil {
		manifests, cases, err = Read(dir)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) && ci.Required():
		tb.Fatalf("the routing data are not beside the repository (CI is set, so this fails rather than skips): %v; "+
			"clone the shared data so that ../shared/data/routing holds manifests.json and dev.jsonl", err)
	case errors.Is(err, fs.ErrNotExist):
		tb.Skipf("routing data absent, accuracy not checked (set CI=true to make this a failure): %v", err)
	case err != nil:
		tb.Fatalf("routing data: %v", err)
	}
	return manifests, cases
}
