package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// dataSchemaURL is the name every data schema is compiled under; each has
// a compiler of its own, so the name never clashes.
const dataSchemaURL = "urn:capgate:data-schema"

// DataSchema is one JSON Schema (draft 2020-12 unless the schema's
// $schema names another) for the structured data parts a skill accepts,
// compiled when the manifest is loaded. The router's structured layer sends
// a message to the one candidate whose schema its data part validates
// against. It never reaches a card. The zero value matches nothing.
type DataSchema struct {
	doc    any // the schema as written: plain JSON values
	schema *jsonschema.Schema
}

// CompileDataSchema compiles doc, a JSON Schema as plain JSON values (maps,
// lists, strings, numbers, booleans, null). A $ref may only point inside
// the schema itself: nothing is loaded from files or the network.
func CompileDataSchema(doc any) (DataSchema, error) {
	if _, ok := doc.(map[string]any); !ok {
		if _, isBool := doc.(bool); !isBool {
			return DataSchema{}, errors.New("want a JSON Schema (a mapping)")
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(dataSchemaURL, doc); err != nil {
		return DataSchema{}, schemaError(err)
	}
	sch, err := c.Compile(dataSchemaURL)
	if err != nil {
		return DataSchema{}, schemaError(err)
	}
	return DataSchema{doc: doc, schema: sch}, nil
}

// schemaError words a compile error on one line: a schema that breaks
// the metaschema names (up to five of) its failing keywords; the
// library's report is a multi-line tree.
func schemaError(err error) error {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if !errors.As(err, &sve) || !errors.As(sve.Err, &ve) {
		return fmt.Errorf("not a valid JSON Schema: %s", strings.Join(strings.Fields(err.Error()), " "))
	}
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 && len(leaves) < 5 {
			leaves = append(leaves, "at /"+strings.Join(e.InstanceLocation, "/")+": "+e.ErrorKind.LocalizedString(english))
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(leaves) == 0 {
		return fmt.Errorf("not a valid JSON Schema: %s", strings.Join(strings.Fields(sve.Err.Error()), " "))
	}
	return fmt.Errorf("not a valid JSON Schema: %s", strings.Join(leaves, "; "))
}

var english = message.NewPrinter(language.English)

// noLoader refuses every external reference.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, errors.New("external references are not allowed in data schemas")
}

// Matches reports whether v (a JSON value as jsonschema.UnmarshalJSON or
// encoding/json decode it) validates against the schema.
func (s DataSchema) Matches(v any) bool {
	return s.schema != nil && s.schema.Validate(v) == nil
}

// Doc returns the schema as written. Callers must not modify it.
func (s DataSchema) Doc() any { return s.doc }

// MarshalJSON writes the schema as written.
func (s DataSchema) MarshalJSON() ([]byte, error) { return json.Marshal(s.doc) }

// UnmarshalJSON compiles the schema in b.
func (s *DataSchema) UnmarshalJSON(b []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("data schema: %w", err)
	}
	c, err := CompileDataSchema(doc)
	if err != nil {
		return fmt.Errorf("data schema: %w", err)
	}
	*s = c
	return nil
}
