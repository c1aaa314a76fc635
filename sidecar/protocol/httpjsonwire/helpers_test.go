package httpjsonwire

import "github.com/capgate/capgate/sidecar/protocol/bodytest"

const ctJSON = bodytest.ContentType

const (
	msg10 = bodytest.Msg10
	msg03 = bodytest.Msg03
)
