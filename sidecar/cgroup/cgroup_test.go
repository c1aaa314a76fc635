package cgroup_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/cgroup"
)

// fakeRoot lays files out in a temporary directory as they would be under
// the file system root (proc/self/cgroup, sys/fs/cgroup/...).
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

func TestMemoryLimit(t *testing.T) {
	const noLimitV1 = "9223372036854771712\n" // what the kernel writes for "no limit"
	tests := []struct {
		name  string
		files map[string]string
		want  cgroup.Limit
		err   string
	}{
		{name: "no cgroup file (not Linux)", files: map[string]string{"etc/hostname": "x"}},
		{name: "v2 with a cgroup namespace", files: map[string]string{
			"proc/self/cgroup":          "0::/\n",
			"sys/fs/cgroup/memory.max":  "536870912\n",
			"sys/fs/cgroup/memory.high": "max\n",
		}, want: cgroup.Limit{Bytes: 512 << 20, File: "/sys/fs/cgroup/memory.max"}},
		{name: "v2 no limit", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}},
		{name: "v2 limit on an ancestor", files: map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":    "268435456\n",
			"sys/fs/cgroup/kubepods/memory.max":         "1073741824\n",
		}, want: cgroup.Limit{Bytes: 256 << 20, File: "/sys/fs/cgroup/kubepods/pod1/memory.max"}},
		{name: "v2 the smallest limit wins", files: map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "134217728\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":    "268435456\n",
		}, want: cgroup.Limit{Bytes: 128 << 20, File: "/sys/fs/cgroup/kubepods/pod1/c1/memory.max"}},
		{name: "v2 host path without a namespace: the mount point's limit", files: map[string]string{
			"proc/self/cgroup":         "0::/system.slice/docker-abc.scope\n",
			"sys/fs/cgroup/memory.max": "67108864\n",
		}, want: cgroup.Limit{Bytes: 64 << 20, File: "/sys/fs/cgroup/memory.max"}},
		{name: "v1", files: map[string]string{
			"proc/self/cgroup": "5:cpuacct,cpu:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            noLimitV1,
		}, want: cgroup.Limit{Bytes: 1 << 30, File: "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes"}},
		{name: "v1 no limit", files: map[string]string{
			"proc/self/cgroup": "4:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": noLimitV1,
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            noLimitV1,
		}},
		{name: "v1 memory among other controllers", files: map[string]string{
			"proc/self/cgroup":                           "3:cpu,memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "100000000\n",
		}, want: cgroup.Limit{Bytes: 100_000_000, File: "/sys/fs/cgroup/memory/memory.limit_in_bytes"}},
		{name: "hybrid: memory on v1 wins over the unified line", files: map[string]string{
			"proc/self/cgroup": "4:memory:/p\n0::/\n",
			"sys/fs/cgroup/memory/p/memory.limit_in_bytes": "33554432\n",
			"sys/fs/cgroup/memory.max":                     "16777216\n",
		}, want: cgroup.Limit{Bytes: 32 << 20, File: "/sys/fs/cgroup/memory/p/memory.limit_in_bytes"}},
		{name: "no memory controller anywhere", files: map[string]string{
			"proc/self/cgroup": "1:name=systemd:/\n",
		}},
		{name: "v2 without the cgroup mount", files: map[string]string{
			"proc/self/cgroup": "0::/\n",
		}},
		{name: "a path escaping the mount stays under it", files: map[string]string{
			"proc/self/cgroup":         "0::/../../etc\n",
			"sys/fs/cgroup/memory.max": "67108864\n",
		}, want: cgroup.Limit{Bytes: 64 << 20, File: "/sys/fs/cgroup/memory.max"}},
		{name: "malformed limit", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "lots\n",
		}, err: `/sys/fs/cgroup/memory.max: "lots" is not a number of bytes`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cgroup.MemoryLimit(os.DirFS(fakeRoot(t, tc.files)))
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
