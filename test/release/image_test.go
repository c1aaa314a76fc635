package release

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/stretchr/testify/require"
)

// TestImage builds the image with `make image` (podman, from an empty base:
// nothing is pulled), saves it from podman's storage as an OCI layout and
// reads it with go-containerregistry: the config (user, entrypoint, command,
// labels), the files of its layers (the binary and the CA bundle, nothing
// else: no shell), and the binary taken out of the layers runs `--version`
// and `serve`, answering /readyz; then the image runs as a container the way
// the Helm chart runs capgate's (checkContainer: podman with runc) and
// answers a routed message.
func TestImage(t *testing.T) {
	podman := need(t, "podman", "podman")
	image := "localhost/capgate-releasetest/capgate"
	tag := fmt.Sprintf("t%d-%d", os.Getpid(), time.Now().UnixNano())
	ref := image + ":" + tag
	out := makeTarget(t, "image", "IMAGE="+image, "IMAGE_TAG="+tag, "IMAGE_BUILD="+t.TempDir())
	require.Contains(t, out, "image: "+ref+" (linux/"+runtime.GOARCH+", commit "+stampCommit+")")
	t.Cleanup(func() { _ = exec.Command(podman, "rmi", "--force", ref).Run() })

	dir := filepath.Join(t.TempDir(), "oci")
	save, err := exec.CommandContext(t.Context(), podman, "save", "--format", "oci-dir", "-o", dir, ref).CombinedOutput()
	require.NoError(t, err, "%s", save)
	idx, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 1)
	img, err := idx.Image(im.Manifests[0].Digest)
	require.NoError(t, err)

	cf, err := img.ConfigFile()
	require.NoError(t, err)
	t.Run("config", func(t *testing.T) {
		require.Equal(t, "linux", cf.OS)
		require.Equal(t, runtime.GOARCH, cf.Architecture)
		require.Equal(t, "65532:65532", cf.Config.User)
		require.Equal(t, []string{"/capgate"}, cf.Config.Entrypoint)
		require.Equal(t, []string{"serve"}, cf.Config.Cmd)
		for k, v := range map[string]string{
			"org.opencontainers.image.source":   "https://github.com/capgate/capgate",
			"org.opencontainers.image.revision": stampCommit,
			"org.opencontainers.image.version":  stampVersion,
			"org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.title":    "capgate",
		} {
			require.Equal(t, v, cf.Config.Labels[k], k)
		}
		// One commit, one image: the timestamps are the commit's, not the build's.
		require.Equal(t, cf.Config.Labels["org.opencontainers.image.created"], cf.Created.UTC().Format(time.RFC3339))
	})

	// The flattened filesystem of every layer.
	files := map[string]*tar.Header{}
	bin := filepath.Join(t.TempDir(), "capgate")
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		files[filepath.Clean("/"+h.Name)] = h
		if h.Name == "capgate" || h.Name == "/capgate" || h.Name == "./capgate" {
			f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
			require.NoError(t, err)
			_, err = io.Copy(f, tr) //nolint:gosec // our own image, bounded by its layer
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
	}
	t.Run("files", func(t *testing.T) {
		var regular []string
		for name, h := range files {
			if h.Typeflag != tar.TypeDir {
				regular = append(regular, name)
			}
		}
		sort.Strings(regular)
		require.Equal(t, []string{"/capgate", "/etc/ssl/certs/ca-certificates.crt"}, regular, "the image holds the binary and the CA bundle only: no shell, no libraries")
		require.Equal(t, int64(0o555), files["/capgate"].Mode&0o777)
		ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
		require.NoError(t, err)
		require.Equal(t, int64(len(ca)), files["/etc/ssl/certs/ca-certificates.crt"].Size)
	})
	t.Run("the binary runs", func(t *testing.T) {
		checkBinary(t, bin)
	})
	t.Run("the container runs as the chart runs it", func(t *testing.T) {
		checkContainer(t, podman, ref)
	})
}
