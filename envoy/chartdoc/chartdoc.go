// Package chartdoc writes the Helm chart's README from its values schema
// (values.schema.json): one row per value, with its type, default (from
// values.yaml) and the schema's description, so the README and the schema
// cannot say different things.
package chartdoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Chart is what the README says about the chart besides its values.
type Chart struct {
	Name, Description, Version, AppVersion string
}

// README renders the chart's README from its schema and default values.
func README(c Chart, schema []byte, defaults map[string]any) ([]byte, error) {
	var s node
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("values.schema.json: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", c.Name)
	b.WriteString("<!-- Generated from values.schema.json and values.yaml by `make chart` (go run ./test/chartpkg); do not edit. -->\n\n")
	fmt.Fprintf(&b, "%s\n\n", c.Description)
	fmt.Fprintf(&b, "Chart version `%s`, capgate `%s`. Install, upgrade, the sidecar form and the admin token: [docs/deploy.md](../../../docs/deploy.md).\n\n", c.Version, c.AppVersion)
	b.WriteString("```sh\nhelm install my-agent oci://<your-registry>/charts/capgate --version " + c.Version + " -f my-values.yaml\n```\n\n")
	b.WriteString("## Values\n\n")
	fmt.Fprintf(&b, "%s\n\n", s.Description)
	b.WriteString("| value | type | default | description |\n|---|---|---|---|\n")
	rows(&b, &s, s.Defs, "", defaults)
	return b.Bytes(), nil
}

// node is the part of a JSON Schema the README reads.
type node struct {
	Type        any              `json:"type"`
	Enum        []any            `json:"enum"`
	Ref         string           `json:"$ref"`
	Description string           `json:"description"`
	Properties  map[string]*node `json:"properties"`
	Defs        map[string]*node `json:"$defs"`
}

func rows(b *bytes.Buffer, n *node, defs map[string]*node, prefix string, defaults any) {
	names := make([]string, 0, len(n.Properties))
	for k := range n.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		p := n.Properties[name]
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		def, _ := defaults.(map[string]any)
		value, present := def[name]
		resolved := p
		if p.Ref != "" {
			resolved = defs[strings.TrimPrefix(p.Ref, "#/$defs/")]
		}
		if len(resolved.Properties) > 0 && path != "config" {
			fmt.Fprintf(b, "| `%s` | object | | %s |\n", path, cell(p.Description))
			rows(b, resolved, defs, path, value)
			continue
		}
		d := ""
		if present {
			d = "`" + compact(value) + "`"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", path, typeOf(p, resolved), d, cell(p.Description))
	}
}

func typeOf(p, resolved *node) string {
	if len(p.Enum) > 0 {
		var vs []string
		for _, e := range p.Enum {
			vs = append(vs, "`"+compact(e)+"`")
		}
		return strings.Join(vs, ", ")
	}
	switch t := resolved.Type.(type) {
	case string:
		return t
	case []any:
		var vs []string
		for _, x := range t {
			vs = append(vs, fmt.Sprint(x))
		}
		return strings.Join(vs, " or ")
	}
	return "any"
}

// compact is a value as one short line of JSON.
func compact(v any) string {
	j, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(j)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
