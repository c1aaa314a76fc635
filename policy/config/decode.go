package config

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/diag/yamlnode"
)

var (
	durationType    = reflect.TypeFor[time.Duration]()
	byteSizeType    = reflect.TypeFor[ByteSize]()
	memoryLimitType = reflect.TypeFor[MemoryLimit]()
)

// decoder fills a Config from a YAML node tree, checking every key and
// type and recording the line of every field it sees.
type decoder struct {
	file  string
	probs *diag.Set
	lines map[string]int
	bad   map[string]bool
	// bindings are the handlers' declared bindings (handlers.<name>.binding).
	bindings map[string]string
	// exposeErrors are the handlers with handlers.<name>.expose_errors: true.
	exposeErrors map[string]bool
}

func (d *decoder) fail(line int, path, format string, args ...any) {
	d.bad[path] = true
	d.probs.Add(d.file, line, path, format, args...)
}

// byteSize decodes a size: an integer number of bytes, or a string with a
// unit ("64MiB", "48 MB").
func (d *decoder) byteSize(n *yaml.Node, v reflect.Value, path string) {
	b, err := parseByteSize(n)
	switch {
	case err == nil:
		v.SetInt(int64(b))
	case n.Kind != yaml.ScalarNode || (n.ShortTag() != yamlnode.TagInt && n.ShortTag() != yamlnode.TagStr):
		d.fail(n.Line, path, "%v, got %s", err, yamlnode.KindName(n))
	default:
		d.fail(n.Line, path, "%v", err)
	}
}

// memoryLimit decodes limits.memory: "auto" or a size.
func (d *decoder) memoryLimit(n *yaml.Node, v reflect.Value, path string) {
	m, err := parseMemoryLimit(n)
	switch {
	case err == nil:
		v.Set(reflect.ValueOf(m))
	case n.Kind != yaml.ScalarNode || (n.ShortTag() != yamlnode.TagInt && n.ShortTag() != yamlnode.TagStr):
		d.fail(n.Line, path, "%v, got %s", err, yamlnode.KindName(n))
	default:
		d.fail(n.Line, path, "%v", err)
	}
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	n = yamlnode.Resolve(n)
	if yamlnode.IsNull(n) {
		return // absent: defaults apply
	}
	if v.Type() == durationType {
		if !yamlnode.IsString(n) {
			d.fail(n.Line, path, `want a duration such as "30s", got %s`, yamlnode.KindName(n))
			return
		}
		dur, err := time.ParseDuration(n.Value)
		if err != nil {
			d.fail(n.Line, path, `%q is not a duration (want e.g. "30s" or "5m")`, n.Value)
			return
		}
		v.SetInt(int64(dur))
		return
	}
	if v.Type() == byteSizeType {
		d.byteSize(n, v, path)
		return
	}
	if v.Type() == memoryLimitType {
		d.memoryLimit(n, v, path)
		return
	}
	if path == "handlers" && v.Kind() == reflect.Map {
		d.handlers(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.structure(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n.Line, path, "want a list, got %s", yamlnode.KindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			p := yamlnode.Index(path, i)
			d.lines[p] = c.Line
			d.decode(c, s.Index(i), p)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n.Line, path, "want a mapping, got %s", yamlnode.KindName(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for _, p := range yamlnode.Pairs(d.file, n, path, d.probs) {
			fp := yamlnode.Join(path, p.Key)
			d.lines[fp] = p.KeyN.Line
			e := reflect.New(v.Type().Elem()).Elem()
			d.decode(p.Value, e, fp)
			m.SetMapIndex(reflect.ValueOf(p.Key), e)
		}
		v.Set(m)
	case reflect.Interface:
		if val, ok := yamlnode.Value(d.file, n, path, d.probs); ok && val != nil {
			v.Set(reflect.ValueOf(val))
		}
	case reflect.String:
		if !yamlnode.IsString(n) {
			d.fail(n.Line, path, "want a string, got %s", yamlnode.KindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != yamlnode.TagBool || n.Decode(&b) != nil {
			d.fail(n.Line, path, "want true or false, got %s", yamlnode.KindName(n))
			return
		}
		v.SetBool(b)
	case reflect.Float64:
		var f float64
		tag := n.ShortTag()
		if n.Kind != yaml.ScalarNode || (tag != yamlnode.TagInt && tag != yamlnode.TagFloat) || n.Decode(&f) != nil {
			d.fail(n.Line, path, "want a number, got %s", yamlnode.KindName(n))
			return
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(n.Line, path, "%q is not a finite number", n.Value)
			return
		}
		v.SetFloat(f)
	case reflect.Int, reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != yamlnode.TagInt || n.Decode(&i) != nil {
			d.fail(n.Line, path, "want an integer, got %s", yamlnode.KindName(n))
			return
		}
		v.SetInt(i)
	default:
		d.fail(n.Line, path, "cannot decode into %s", v.Type())
	}
}

// structure decodes a mapping into a struct by its yaml tags and reports
// every key the struct does not have.
func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "want a mapping, got %s", yamlnode.KindName(n))
		return
	}
	t := v.Type()
	index := map[string]int{}
	var known []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		index[name] = i
		known = append(known, name)
	}
	pairs := yamlnode.Pairs(d.file, n, path, d.probs)
	for _, p := range pairs {
		fp := yamlnode.Join(path, p.Key)
		i, ok := index[p.Key]
		if !ok {
			d.fail(p.KeyN.Line, fp, "%s", yamlnode.UnknownField(p.Key, known))
			// One message per mistake: the field the key misspells is
			// not reported missing too (when it is indeed absent).
			if s, ok := diag.Suggest(p.Key, known); ok && !slices.ContainsFunc(pairs, func(q yamlnode.Pair) bool { return q.Key == s }) {
				d.bad[yamlnode.Join(path, s)] = true
			}
			continue
		}
		d.lines[fp] = p.KeyN.Line
		d.decode(p.Value, v.Field(i), fp)
	}
}

// handlers decodes the handlers mapping: each value is a target string
// (called over JSON-RPC) or a mapping {url, binding, expose_errors}.
func (d *decoder) handlers(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "want a mapping, got %s", yamlnode.KindName(n))
		return
	}
	m := make(map[string]string, len(n.Content)/2)
	for _, p := range yamlnode.Pairs(d.file, n, path, d.probs) {
		fp := yamlnode.Join(path, p.Key)
		d.lines[fp] = p.KeyN.Line
		val := yamlnode.Resolve(p.Value)
		if val == nil || val.Kind != yaml.MappingNode {
			var target string
			d.decode(p.Value, reflect.ValueOf(&target).Elem(), fp)
			m[p.Key] = target
			continue
		}
		var e struct {
			URL          string `yaml:"url"`
			Binding      string `yaml:"binding"`
			ExposeErrors bool   `yaml:"expose_errors"`
		}
		d.structure(val, reflect.ValueOf(&e).Elem(), fp)
		if _, ok := d.lines[yamlnode.Join(fp, "url")]; !ok {
			if !d.bad[yamlnode.Join(fp, "url")] { // else misspelt, and reported so
				d.fail(val.Line, yamlnode.Join(fp, "url"), "required")
			}
			d.bad[fp] = true
		}
		m[p.Key] = e.URL
		if _, ok := d.lines[yamlnode.Join(fp, "binding")]; ok {
			if d.bindings == nil {
				d.bindings = map[string]string{}
			}
			d.bindings[p.Key] = e.Binding
		}
		if e.ExposeErrors {
			if d.exposeErrors == nil {
				d.exposeErrors = map[string]bool{}
			}
			d.exposeErrors[p.Key] = true
		}
	}
	v.Set(reflect.ValueOf(m))
}
