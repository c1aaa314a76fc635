package echo_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/handler/echo"
	"github.com/capgate/capgate/sidecar/handlerauth"
)

func TestReportOf(t *testing.T) {
	c := handlerauth.Claims{Subject: "p", Tenant: "t", Audience: "h", Capability: "c", Scopes: []string{"b", "a", "b"}}
	for _, tc := range []struct {
		name  string
		parts []*a2a.Part
		want  []string
	}{
		{"no parts", nil, []string{}},
		{"text ignores a declared type", []*a2a.Part{{Content: a2a.Text("hi"), MediaType: "text/markdown"}}, []string{"text/plain"}},
		{"data defaults to JSON", []*a2a.Part{a2a.NewDataPart(map[string]any{"a": 1})}, []string{"application/json"}},
		{"raw and url default to octet-stream", []*a2a.Part{a2a.NewRawPart([]byte{1}), {Content: a2a.URL("https://x/y")}},
			[]string{"application/octet-stream"}},
		{"declared types normalised, sorted, unique", []*a2a.Part{
			{Content: a2a.Raw([]byte{1}), MediaType: "Application/PDF; x=1"},
			a2a.NewFileURLPart("https://x/y", "application/pdf"),
			a2a.NewTextPart("t"),
		}, []string{"application/pdf", "text/plain"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := echo.ReportOf(c, a2a.NewMessage(a2a.MessageRoleUser, tc.parts...))
			require.Equal(t, tc.want, r.MediaTypes)
			require.Equal(t, []string{"a", "b"}, r.Scopes)
			require.Equal(t, echo.Report{Capability: "c", Handler: "h", Principal: "p", Tenant: "t", Scopes: r.Scopes, MediaTypes: r.MediaTypes}, r)
		})
	}
}

func TestServeRefuses(t *testing.T) {
	never := func(context.Context, string) (handlerauth.Claims, error) {
		t.Fatal("verify must not be reached")
		return handlerauth.Claims{}, nil
	}
	for _, tc := range []struct {
		name    string
		h       http.Handler
		version string
		want    string
	}{
		{"unsupported version", echo.New(never), "2.0", `"code":-32009`},
		{"nil verifier fails closed", echo.New(nil), "1.0", `"code":-31401`},
		{"no capability claim", echo.New(func(context.Context, string) (handlerauth.Claims, error) {
			return handlerauth.Claims{Subject: "p"}, nil
		}), "", `"code":-31401`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(
				`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`))
			if tc.version == "" {
				r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(
					`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}}`))
			} else {
				r.Header.Set("A2A-Version", tc.version)
			}
			r.Header.Set("Authorization", "Bearer a.b.c")
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, r)
			require.Contains(t, w.Body.String(), tc.want)
		})
	}
}
