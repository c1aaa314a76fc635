package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/revision"
)

// servePublicCard serves the public projection to anyone, with a strong ETag
// over the bytes and Cache-Control from the config.
func (g *Gateway) servePublicCard(w http.ResponseWriter, r *http.Request, rev *revision.Revision) {
	start := g.now()
	entry := &decisionlog.Entry{DecisionID: g.ids.Next(), Binding: string(protocol.HTTPJSON), Operation: string(protocol.GetAgentCard)}
	w.Header().Set(HeaderDecisionID, entry.DecisionID)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		e := protocol.Errorf(protocol.MethodNotAllowed, "the agent card is read with GET")
		g.finish(rev, start, entry, e)
		writeStatusError(w, e)
		return
	}
	g.finish(rev, start, entry, nil)
	h := w.Header()
	h.Set("ETag", rev.PublicETag)
	h.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(rev.Config().Cards.MaxAge.Seconds())))
	h.Set("Vary", "Accept-Encoding")
	if etagMatch(r.Header.Get("If-None-Match"), rev.PublicETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(rev.PublicCard)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(rev.PublicCard)
	}
}

// etagMatch implements If-None-Match's weak comparison over a list of tags.
func etagMatch(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// serveExtendedCard answers GetExtendedAgentCard with the caller's projection.
func (g *Gateway) serveExtendedCard(ctx context.Context, call *Call, entry *decisionlog.Entry, resp Responder) *protocol.Error {
	rev := call.Rev
	if !rev.ExtendedCard {
		return protocol.Errorf(protocol.UnsupportedOperation, "this agent does not offer an extended agent card")
	}
	if !call.Principal.Authenticated {
		return protocol.MissingCredentials()
	}
	if !card.HasExtendedContent(rev.Registry().All()) {
		return protocol.Errorf(protocol.ExtendedAgentCardNotConfigured, "the extended agent card is enabled but no capability is extended or in preview")
	}
	c, err := card.ForCaller(ctx, rev.Config(), rev.Engine, call.Principal.Caller())
	if err != nil {
		return protocol.Wrap(protocol.Internal, err, "the extended agent card could not be built")
	}
	entry.Reasons = []string{fmt.Sprintf("skills:%d", len(c.Skills))}
	b, err := renderCard(ctx, c, call.Request.Version)
	if err != nil {
		return protocol.Wrap(protocol.Internal, err, "the extended agent card could not be built")
	}
	// The card is per caller: never cached by a shared cache, and a
	// private cache keys it on the credential.
	h := resp.Writer().Header()
	h.Set("Cache-Control", "private, max-age="+strconv.Itoa(int(rev.Config().Cards.MaxAge.Seconds())))
	h.Set("Vary", "Authorization, A2A-Version")
	if resp.Binding() == protocol.HTTPJSON {
		// A GET: the body is the card, so it has a validator and can be
		// revalidated. (A JSON-RPC POST answer is not cacheable.)
		etag := cardETag(b)
		h.Set("ETag", etag)
		if etagMatch(call.Header.Get("If-None-Match"), etag) {
			resp.Writer().WriteHeader(http.StatusNotModified)
			return nil
		}
	}
	return g.writeRaw(resp, b)
}

// cardETag is the strong ETag of served card bytes: the first 128 bits of
// their SHA-256, as the revision computes the public card's.
func cardETag(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// renderCard serializes a card for the request's protocol version: 1.0 gets
// the v1.0 card, 0.3 the union of v1.0 and v0.3 fields a2a-go produces for
// 0.3 clients.
func renderCard(ctx context.Context, c *a2a.AgentCard, v protocol.Version) ([]byte, error) {
	if v == protocol.V03 {
		p, ok := a2av0.NewStaticAgentCardProducer(withV03Interfaces(c)).(interface {
			CardJSON(context.Context) ([]byte, error)
		})
		if ok {
			return p.CardJSON(ctx)
		}
	}
	return card.Marshal(c)
}

// withV03Interfaces returns a copy of c that also lists each interface under
// protocol version 0.3: the gateway answers 0.3 requests on the same
// endpoints, and a2av0's card producer needs a 0.3 interface to fill the 0.3
// url, preferredTransport and additionalInterfaces (without one it fails).
func withV03Interfaces(c *a2a.AgentCard) *a2a.AgentCard {
	cc := *c
	cc.SupportedInterfaces = slices.Clone(c.SupportedInterfaces)
	for _, iface := range c.SupportedInterfaces {
		if iface.ProtocolVersion == a2av0.Version {
			return c
		}
		v03 := *iface
		v03.ProtocolVersion = a2av0.Version
		cc.SupportedInterfaces = append(cc.SupportedInterfaces, &v03)
	}
	return &cc
}

func (g *Gateway) writeRaw(resp Responder, b []byte) *protocol.Error {
	if err := resp.RawResult(b); err != nil {
		return protocol.Wrap(protocol.Internal, err, "the response could not be written")
	}
	return nil
}
