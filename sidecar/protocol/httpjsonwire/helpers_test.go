package httpjsonwire

const ctJSON = "application/json"

const (
	msg10 = `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	msg03 = `{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}`
)
