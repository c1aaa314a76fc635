package extauthz

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tasks"
)

// benchFixture is a server of the finance example whose issuer key is an
// ES256 key generated here, and a realistic allowed SendMessage check: a
// bearer token, a ~400 B JSON-RPC body and the headers Envoy forwards.
func benchFixture(b *testing.B) (*Server, *authv3.CheckRequest) {
	b.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(b, err)
	jwks, err := identity.MarshalJWKS(identity.PublicJWK{Key: &key.PublicKey, Alg: "ES256", Kid: "bench-es256"})
	require.NoError(b, err)
	dir := copyFinance(b)
	require.NoError(b, os.WriteFile(filepath.Join(dir, "keys", "demo.jwks.json"), jwks, 0o644))
	rev := revisionAt(b, dir)

	now := time.Now()
	tok, err := identity.SignDemoToken(key, "ES256", "bench-es256", map[string]any{
		"iss": demoIssuer, "aud": demoAudience, "sub": "orchestrator@partner", "tenant": "partner-co",
		"scope": "recon.run invoices.read", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	require.NoError(b, err)

	body := rpcBody(`"req-7f3a9c"`, "SendMessage", `{"message":{"messageId":"5b1f8a52-3c0e-4d8e-9a51-0c2f7e9d1b44",`+
		`"contextId":"ctx-2024-11-invoices","role":"ROLE_USER","parts":[{"text":"Reconcile invoice INV-20931 against its `+
		`purchase order and list line-level differences."},{"url":"https://files.example.com/inv/INV-20931.pdf",`+
		`"mediaType":"application/pdf"}]},`+
		`"configuration":{"acceptedOutputModes":["application/json"]}}`)
	req := jsonrpc(body, map[string]string{
		"a2a-version":       v1,
		"authorization":     "Bearer " + tok,
		"user-agent":        "a2a-go/2.3.1",
		"accept":            "application/json",
		"x-request-id":      "d7c1f3e0-9a4b-4d21-8f0e-2b6a5c4e9f10",
		"x-forwarded-proto": "https",
		"traceparent":       "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	})
	s := New(revision.NewHolder(rev), tasks.NewMemory(0))
	resp, err := s.Check(context.Background(), req)
	require.NoError(b, err)
	require.Equal(b, int32(codes.OK), resp.GetStatus().GetCode(), resp.GetDeniedResponse().GetBody())
	b.Logf("body %d B, %d headers", len(body), len(req.GetAttributes().GetRequest().GetHttp().GetHeaders()))
	return s, req
}

// BenchmarkCheck is the full decision of an allowed SendMessage, in process:
// strict parse, cached token verification, cached policy view, response,
// decision log (discarding) and metrics.
func BenchmarkCheck(b *testing.B) {
	s, req := benchFixture(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		resp, _ := s.Check(ctx, req)
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(start))
		}
		if resp.GetStatus().GetCode() != 0 {
			b.Fatal("denied")
		}
	}
	reportPercentiles(b, lat)
}

// BenchmarkCheckNoop is the floor: a server that allows without looking.
func BenchmarkCheckNoop(b *testing.B) {
	_, req := benchFixture(b)
	var s authv3.AuthorizationServer = Noop{}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if resp, _ := s.Check(ctx, req); resp.GetStatus().GetCode() != 0 {
			b.Fatal("denied")
		}
	}
}

// BenchmarkCheckGRPC and BenchmarkCheckNoopGRPC go through a real gRPC
// server and client on loopback, in parallel.
func BenchmarkCheckGRPC(b *testing.B) {
	s, req := benchFixture(b)
	benchGRPC(b, s, req)
}

func BenchmarkCheckNoopGRPC(b *testing.B) {
	_, req := benchFixture(b)
	benchGRPC(b, Noop{}, req)
}

func benchGRPC(b *testing.B, srv authv3.AuthorizationServer, req *authv3.CheckRequest) {
	client := loopbackClient(b, srv)
	b.SetParallelism(32) // keep the server busy: throughput, not one round trip at a time
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			resp, err := client.Check(ctx, req)
			if err != nil || resp.GetStatus().GetCode() != 0 {
				b.Error("check failed", err)
				return
			}
		}
	})
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
