package manifest_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
)

const learnDoc = `id: book
state: ga
visibility: public
skill: {name: Book, description: Books a flight., tags: [travel], examples: ["book a flight"]}
requires_scopes: []
tenants: "*"
handler: h
`

func loadLearn(t *testing.T, routing string, files map[string]string) (*manifest.Registry, error) {
	t.Helper()
	fsys := fstest.MapFS{"sub/book.yaml": {Data: []byte(learnDoc + routing)}}
	for p, s := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(s)}
	}
	return manifest.Load([]manifest.Dir{{FS: fsys, Name: "capabilities"}}, manifest.Options{})
}

// TestRoutingExamplesFile: routing.examples_file is read relative to the
// manifest's folder (comments and blank lines skipped); routing.learn is a
// boolean; a missing file is a warning, a bad reference or file a problem
// naming the field.
func TestRoutingExamplesFile(t *testing.T) {
	reg, err := loadLearn(t, "routing: {learn: false, examples_file: book.examples.txt}\n",
		map[string]string{"sub/book.examples.txt": "# accepted\n\ni need to move my flight\n  rebook me  \n"})
	require.NoError(t, err)
	c, _ := reg.Get("book")
	require.Equal(t, []string{"i need to move my flight", "rebook me"}, c.RoutingExamples)
	require.Equal(t, []string{"book a flight"}, c.Skill.Examples, "the card's examples are untouched")
	require.NotNil(t, c.Routing.Learn)
	require.False(t, c.Routing.LearnOn(true))
	require.True(t, manifest.Routing{}.LearnOn(true))
	require.False(t, manifest.Routing{}.LearnOn(false))

	reg, err = loadLearn(t, "routing: {examples_file: book.examples.txt}\n", nil)
	require.NoError(t, err)
	require.Len(t, reg.Warnings(), 1)
	require.Contains(t, reg.Warnings()[0].Message, "does not exist yet")

	for routing, want := range map[string]string{
		"routing: {learn: yes please}\n":                         "routing.learn: want true or false",
		"routing: {examples_file: book.yaml}\n":                  "must end in .examples.txt",
		"routing: {examples_file: /etc/passwd.examples.txt}\n":   "must be a relative slash path",
		"routing: {examples_file: ../../outside.examples.txt}\n": "leaves the manifests folder",
		"routing: {examples_file: long.examples.txt}\n":          "a line longer than 1024 bytes",
		"routing: {examples_file: \"\"}\n":                       "want a file name",
		"routing: {examples_fil: x.txt}\n":                       "examples_fil",
	} {
		_, err := loadLearn(t, routing, map[string]string{"sub/long.examples.txt": strings.Repeat("x", 2000) + "\n"})
		require.ErrorContains(t, err, want, routing)
	}
	_, err = manifest.LoadJSONArray("m.json", []byte(`[{"id":"book","state":"ga","visibility":"public","skill":{"name":"B","description":"d","tags":[]},"requires_scopes":[],"tenants":"*","handler":"h","routing":{"examples_file":"x.examples.txt"}}]`), manifest.Options{})
	require.ErrorContains(t, err, "[0].routing.examples_file: needs a manifests folder")
	require.True(t, manifest.IsManifestFile("capabilities/book.examples.txt"), "the reloader watches examples files")
	require.True(t, manifest.IsManifestFile("capabilities/Book.EXAMPLES.TXT"))
	require.False(t, manifest.IsManifestFile("capabilities/notes.txt"), "other text files are not the deployment's")
}
