package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/trace"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tracing"
)

// servePublicCard serves the public projection to anyone, with a strong ETag
// over the bytes, Last-Modified, and Cache-Control from the config. A 0.3
// caller (the 0.3 card path, or A2A-Version: 0.3) gets the card in the 0.3
// shape; a 1.0 caller (A2A-Version: 1.0) the 1.0 card. A request that names
// no version gets cards.default_version's shape: 1.0 by default, unlike on
// the A2A endpoints, since the card is where a client learns which versions
// exist and the 1.0 card lists them; "0.3" for fleets of 0.3 clients that
// fetch this path without the header.
func (g *Gateway) servePublicCard(w http.ResponseWriter, r *http.Request, rev *revision.State) {
	body, etag := rev.PublicCard, rev.PublicETag
	if publicCardV03(r, rev.Config().Cards.DefaultVersion) {
		body, etag = rev.PublicCardV03, rev.PublicETagV03
	}
	start := g.now()
	entry := &decisionlog.Entry{DecisionID: g.ids.Next(), Binding: string(protocol.HTTPJSON), Operation: string(protocol.GetAgentCard), Span: trace.SpanFromContext(r.Context()), RequestedBy: r.RemoteAddr}
	w.Header().Set(HeaderDecisionID, entry.DecisionID)
	tracing.SetRoute(entry.Span, r.Method, r.URL.EscapedPath()) // one of the two card paths
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		e := protocol.Errorf(protocol.MethodNotAllowed, "the agent card is read with GET")
		g.finish(rev, start, entry, e)
		writeStatusError(w, e)
		return
	}
	g.finish(rev, start, entry, nil)
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Last-Modified", rev.CardsModified.UTC().Format(http.TimeFormat))
	h.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(rev.Config().Cards.MaxAge.Seconds())))
	h.Set("Vary", "Accept-Encoding, A2A-Version")
	if notModified(r.Header, etag, rev.CardsModified) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// publicCardFor is the public card in the shape of protocol version v.
func publicCardFor(rev *revision.State, v protocol.Version) []byte {
	if v == protocol.V03 {
		return rev.PublicCardV03
	}
	return rev.PublicCard
}

// publicCardV03 reports whether a public card request gets the 0.3 shape: at the 0.3 path;
// by A2A-Version (given once, exactly 0.3); or, naming no version, when cards.default_version
// is 0.3.
func publicCardV03(r *http.Request, defaultVersion string) bool {
	if r.URL.EscapedPath() == PublicCardPathV03 {
		return true
	}
	v := r.Header.Values(HeaderVersion)
	if len(v) == 0 {
		return defaultVersion == string(protocol.V03)
	}
	return len(v) == 1 && strings.TrimSpace(v[0]) == string(protocol.V03)
}

// notModified applies a card request's conditional headers (RFC 9110 13.2.2): If-None-Match
// when given, else If-Modified-Since against the card's Last-Modified.
func notModified(h http.Header, etag string, modified time.Time) bool {
	if inm := h.Get("If-None-Match"); inm != "" {
		return etagMatch(inm, etag)
	}
	ims, err := http.ParseTime(h.Get("If-Modified-Since"))
	return err == nil && !modified.Truncate(time.Second).After(ims)
}

// etagMatch implements If-None-Match's weak comparison over a list of tags.
func etagMatch(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == strings.TrimPrefix(etag, "W/") {
			return true
		}
	}
	return false
}

// serveExtendedCard answers GetExtendedAgentCard with the caller's projection.
func (g *Gateway) serveExtendedCard(ctx context.Context, call *exchange.Call, entry *decisionlog.Entry, w http.ResponseWriter) (*exchange.Result, *protocol.Error) {
	rev := call.Rev
	if !rev.ExtendedCard {
		return nil, protocol.Errorf(protocol.UnsupportedOperation, "this agent does not offer an extended agent card")
	}
	if !call.Principal.Authenticated {
		return nil, protocol.MissingCredentials()
	}
	if !card.HasExtendedContent(rev.Registry().All()) {
		return nil, protocol.Errorf(protocol.ExtendedAgentCardNotConfigured, "the extended agent card is enabled but no capability is extended or in preview")
	}
	c, err := card.ForCaller(ctx, rev.Config(), rev.Engine, call.Principal.Caller())
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the extended agent card could not be built")
	}
	entry.Reasons = []string{fmt.Sprintf("skills:%d", len(c.Skills))}
	b, err := renderCard(c, call.Request, rev.Config().Cards.SecurityRequirements)
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the extended agent card could not be built")
	}
	if call.Request.ProtoJSON03() { // GET /v1/card: the 0.3 proto's AgentCard, signed as served
		var perr *protocol.Error
		if b, perr = httpjsonwire.ProtoJSON03Card(b); perr != nil {
			return nil, perr
		}
	}
	// The card is per caller: never cached by a shared cache, and a
	// private cache keys it on the credential.
	h := w.Header()
	h.Set("Cache-Control", "private, max-age="+strconv.Itoa(int(rev.Config().Cards.MaxAge.Seconds())))
	h.Set("Vary", "Authorization, A2A-Version")
	b, etag, err := revision.SignCard(rev.CardSigner, b)
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the extended agent card could not be signed")
	}
	if call.Request.Binding == protocol.HTTPJSON {
		// A GET: the body is the card, so it has a validator and can be
		// revalidated. (A JSON-RPC POST answer is not cacheable.)
		h.Set("ETag", etag)
		h.Set("Last-Modified", rev.CardsModified.UTC().Format(http.TimeFormat))
		if notModified(call.Header, etag, rev.CardsModified) {
			w.WriteHeader(http.StatusNotModified)
			return nil, nil
		}
	}
	res := exchange.Value(protocol.KindCard, b)
	return &res, nil
}

// renderCard serializes a card for the request's protocol version: 1.0 gets
// the v1.0 card with its security requirements in form (cards.security_requirements), 0.3
// the 0.3 card (card.V03). A gRPC answer is the proto message, so its requirements are in
// the proto's form whatever form says.
func renderCard(c *a2a.AgentCard, req *protocol.Request, form string) ([]byte, error) {
	switch {
	case req.Version == protocol.V03:
		return card.MarshalV03(c)
	case req.Binding == protocol.GRPC:
		return card.Marshal(c)
	}
	return card.MarshalAs(c, form)
}
