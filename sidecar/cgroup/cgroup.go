// Package cgroup reads the memory limit of the control group this process
// runs in (cgroup v2 memory.max, or v1 memory.limit_in_bytes), so that a
// container's limit can size the Go runtime's soft memory limit.
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Where the kernel publishes a process's cgroups and where the hierarchies
// are mounted, relative to the file system root. Docker, containerd,
// Kubernetes and systemd all mount cgroups at /sys/fs/cgroup.
const (
	selfCgroup = "proc/self/cgroup"
	mountV2    = "sys/fs/cgroup"
	mountV1    = "sys/fs/cgroup/memory"
	fileV2     = "memory.max"
	fileV1     = "memory.limit_in_bytes"
	// noLimitV1 is the smallest cgroup v1 value that means "no limit": the
	// kernel writes PAGE_COUNTER_MAX pages (just under 2^63 bytes).
	noLimitV1 = 1 << 62
)

// Limit is a memory limit and the file it was read from.
type Limit struct {
	Bytes int64  // 0: no limit
	File  string // e.g. /sys/fs/cgroup/memory.max
}

// MemoryLimit returns the memory limit in force for this process under
// root (os.DirFS("/") in production): the smallest limit set on its cgroup
// or any ancestor up to the hierarchy's mount point. A process that is in
// no cgroup (no /proc/self/cgroup, as outside Linux) or whose cgroups set
// no limit gets a zero Limit and no error.
func MemoryLimit(root fs.FS) (Limit, error) {
	b, err := fs.ReadFile(root, selfCgroup)
	if errors.Is(err, fs.ErrNotExist) {
		return Limit{}, nil
	}
	if err != nil {
		return Limit{}, err
	}
	v1, v2, ok := parse(b)
	switch {
	case v1 != "": // the memory controller is on a v1 hierarchy (v1 or hybrid)
		return walk(root, mountV1, v1, fileV1)
	case ok:
		return walk(root, mountV2, v2, fileV2)
	default:
		return Limit{}, nil
	}
}

// parse reads /proc/self/cgroup: lines "hierarchy-id:controllers:path".
// v1 is the path of the v1 hierarchy holding the memory controller, v2 the
// path in the unified hierarchy (id 0, no controllers), ok whether there
// was one.
func parse(b []byte) (v1, v2 string, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, rest, found := strings.Cut(sc.Text(), ":")
		controllers, p, found2 := strings.Cut(rest, ":")
		if !found || !found2 {
			continue
		}
		if id == "0" && controllers == "" {
			v2, ok = p, true
			continue
		}
		for c := range strings.SplitSeq(controllers, ",") {
			if c == "memory" {
				v1 = p
			}
		}
	}
	return v1, v2, ok
}

// walk reads file in the cgroup's directory under mount and in each
// ancestor up to mount, and returns the smallest limit. Directories that
// do not exist are skipped: a container without its own cgroup namespace
// sees the host's path in /proc/self/cgroup but has its own cgroup mounted
// at the mount point.
func walk(root fs.FS, mount, cgroupPath, file string) (Limit, error) {
	var lim Limit
	dir := path.Join(mount, path.Clean("/"+cgroupPath))
	for {
		name := path.Join(dir, file)
		n, err := readLimit(root, name)
		if err != nil {
			return Limit{}, err
		}
		if n > 0 && (lim.Bytes == 0 || n < lim.Bytes) {
			lim = Limit{Bytes: n, File: "/" + name}
		}
		if dir == mount {
			return lim, nil
		}
		dir = path.Dir(dir)
	}
}

// readLimit reads one limit file: 0 when it is absent or says there is no
// limit ("max" in v2, a value near 2^63 in v1).
func readLimit(root fs.FS, name string) (int64, error) {
	b, err := fs.ReadFile(root, name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/%s: %q is not a number of bytes", name, s)
	}
	if n >= noLimitV1 {
		return 0, nil
	}
	return int64(n), nil
}
