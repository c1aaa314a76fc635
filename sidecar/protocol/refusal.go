package protocol

// Refusal is the HTTP answer to a refused request: the same status,
// headers and body whichever door refuses it (the gateway writes it, ext_authz hands it to
// Envoy as the denied response).
type Refusal struct {
	Status int
	// Header holds lower-case header names and values.
	Header [][2]string
	Body   []byte
}
