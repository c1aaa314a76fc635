package testutil

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ClientOption configures a client built by Server.Client.
type ClientOption func(*clientOptions)

type clientOptions struct {
	headers     [][2]string
	withoutCard bool
	responses   *Responses
}

// Bearer sends "Authorization: Bearer tok" with every call.
func Bearer(tok string) ClientOption { return Header("Authorization", "Bearer "+tok) }

// Header sends the header with every call (as an a2a-go service parameter).
func Header(name, value string) ClientOption {
	return func(o *clientOptions) { o.headers = append(o.headers, [2]string{name, value}) }
}

// WithoutCard builds the client from the card's endpoints only
// (a2aclient.NewFromEndpoints): the client then does not know the card and
// sends GetExtendedAgentCard even when the card does not advertise one.
func WithoutCard() ClientOption { return func(o *clientOptions) { o.withoutCard = true } }

// RecordResponses records the HTTP responses the client receives in r.
func RecordResponses(r *Responses) ClientOption { return func(o *clientOptions) { o.responses = r } }

// Responses records the status and headers of HTTP responses, in order.
type Responses struct {
	mu   sync.Mutex
	list []*http.Response
}

// Last is the most recent response (its body already consumed), nil if none.
func (r *Responses) Last() *http.Response {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.list) == 0 {
		return nil
	}
	return r.list[len(r.list)-1]
}

type recordingTransport struct {
	base http.RoundTripper
	r    *Responses
}

func (rt recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.base.RoundTrip(req)
	if resp != nil {
		rt.r.mu.Lock()
		rt.r.list = append(rt.r.list, resp)
		rt.r.mu.Unlock()
	}
	return resp, err
}

// PublicCard resolves the public card with a2a-go's card resolver, exactly
// as a client discovers the agent.
func (s *Server) PublicCard(t testing.TB) *a2a.AgentCard {
	t.Helper()
	c, err := agentcard.NewResolver(s.HTTP).Resolve(t.Context(), s.URL)
	require.NoError(t, err)
	return c
}

// Client returns an official a2a-go client for binding
// (a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON or a2a.TransportProtocolGRPC), built
// from the resolved public card with its interface URLs pointed at the bound
// address. The test fails if the card does not advertise the binding.
func (s *Server) Client(t testing.TB, binding a2a.TransportProtocol, opts ...ClientOption) *a2aclient.Client {
	t.Helper()
	var o clientOptions
	for _, opt := range opts {
		opt(&o)
	}
	card := s.PublicCard(t)
	var ifaces []*a2a.AgentInterface
	for _, iface := range card.SupportedInterfaces {
		if iface.ProtocolBinding != binding {
			continue
		}
		cp := *iface
		if binding == a2a.TransportProtocolGRPC {
			cp.URL = "dns:///" + s.Addrs.A2A // the card's form (docs/cards.md), at the bound address
		} else {
			cp.URL = s.rewrite(iface.URL)
		}
		ifaces = append(ifaces, &cp)
	}
	require.NotEmpty(t, ifaces, "the public card advertises no %s interface", binding)
	card.SupportedInterfaces = ifaces

	hc := s.HTTP
	if o.responses != nil {
		hc = &http.Client{Transport: recordingTransport{base: s.HTTP.Transport, r: o.responses}, Timeout: s.HTTP.Timeout}
	}
	fopts := []a2aclient.FactoryOption{
		a2aclient.WithJSONRPCTransport(hc),
		a2aclient.WithRESTTransport(hc),
		a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}),
	}
	if len(o.headers) > 0 {
		fopts = append(fopts, a2aclient.WithCallInterceptors(headerInterceptor(o.headers)))
	}
	var (
		c   *a2aclient.Client
		err error
	)
	if o.withoutCard {
		c, err = a2aclient.NewFromEndpoints(t.Context(), ifaces, fopts...)
	} else {
		c, err = a2aclient.NewFromCard(t.Context(), card, fopts...)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// headerInterceptor adds fixed headers to every call's service parameters,
// which both HTTP transports send as request headers.
type headerInterceptor [][2]string

func (h headerInterceptor) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	for _, kv := range h {
		req.ServiceParams.Append(kv[0], kv[1])
	}
	return ctx, nil, nil
}

func (headerInterceptor) After(context.Context, *a2aclient.Response) error { return nil }

var _ a2aclient.CallInterceptor = headerInterceptor(nil)
