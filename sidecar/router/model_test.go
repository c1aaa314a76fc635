package router

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

// chatServer is an OpenAI-compatible endpoint answering content, recording
// what it was sent.
func chatServer(t *testing.T, content string, delay time.Duration, seen *[]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role, Content string
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if seen != nil {
			*seen = append(*seen, r.Header.Get("Authorization"), req.Model, req.Messages[1].Content)
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]string{"role": "assistant", "content": content}}}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func modelCandidates() []*manifest.Capability {
	reg := fixture()
	a, _ := reg.Get("lookup-invoice")
	b, _ := reg.Get("reconcile-invoice")
	return []*manifest.Capability{a, b}
}

func TestModelChoose(t *testing.T) {
	t.Setenv("CAPGATE_TEST_MODEL_KEY", "sk-test")
	tests := []struct {
		name    string
		content string
		delay   time.Duration
		want    string
	}{
		{"valid choice", `{"id": "reconcile-invoice", "confidence": 0.9}`, 0, "reconcile-invoice"},
		{"no fit", `{"id": null, "confidence": 0}`, 0, ""},
		{"id not offered", `{"id": "purge-invoice-cache", "confidence": 0.99}`, 0, ""},
		{"below threshold", `{"id": "lookup-invoice", "confidence": 0.3}`, 0, ""},
		{"prose around json", `Sure! {"id": "lookup-invoice", "confidence": 0.9}`, 0, ""},
		{"extra member", `{"id": "lookup-invoice", "confidence": 0.9, "why": "x"}`, 0, ""},
		{"confidence missing", `{"id": "lookup-invoice"}`, 0, ""},
		{"timeout", `{"id": "lookup-invoice", "confidence": 0.9}`, 2 * time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []string
			srv := chatServer(t, tt.content, tt.delay, &seen)
			m := NewModel(&config.ModelRouter{URL: srv.URL, Model: "router-small", APIKeyEnv: "CAPGATE_TEST_MODEL_KEY", Timeout: 200 * time.Millisecond}, srv.Client())
			got, err := m.Choose(t.Context(), "reconcile this against the PO", modelCandidates(), 0.6)
			if tt.want == "" {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got.ID)
			require.Equal(t, "Bearer sk-test", seen[0])
			require.Equal(t, "router-small", seen[1])
			// Only the candidates' descriptions are given, nothing else of the registry.
			require.Contains(t, seen[2], "reconcile-invoice")
			require.NotContains(t, seen[2], "extract-invoice-fields")
			require.True(t, strings.HasSuffix(seen[2], "reconcile this against the PO"))
		})
	}
}

func TestNewModelNilWithoutConfig(t *testing.T) {
	require.Nil(t, NewModel(nil, nil))
}
