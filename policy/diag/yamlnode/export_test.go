package yamlnode

// Both paths of Parse, for the differential tests.
var (
	ParseJSON = parseJSON
	ParseYAML = parseYAML
)
