package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

// MaxModelResponseBytes bounds what is read from the model endpoint.
const MaxModelResponseBytes = 256 << 10

// Model asks an OpenAI-compatible chat-completions endpoint to choose among
// the candidates the classifier was unsure about. It sees only the
// candidates' ids, names and descriptions and the message text; it must
// answer strict JSON naming one candidate or none. Any failure, timeout or
// doubt means "no choice": the caller is asked to clarify.
type Model struct {
	url, model, apiKey string
	timeout            time.Duration
	client             *http.Client
}

// NewModel returns the model router of a config, or nil when none is set.
func NewModel(cfg *config.ModelRouter, client *http.Client) *Model {
	if cfg == nil {
		return nil
	}
	if client == nil {
		client = &http.Client{}
	}
	m := &Model{url: cfg.URL, model: cfg.Model, timeout: cfg.Timeout, client: client}
	if cfg.APIKeyEnv != "" {
		m.apiKey = os.Getenv(cfg.APIKeyEnv)
	}
	if m.timeout <= 0 {
		m.timeout = config.DefaultModelTimeout
	}
	return m
}

// ModelChoice is the model's answer.
type ModelChoice struct {
	ID         string
	Confidence float64
}

// ErrNoChoice means the model did not pick a candidate it was offered.
var ErrNoChoice = errors.New("the model made no valid choice")

const modelInstructions = `You route a user's message to exactly one capability of an agent, or to none.
Answer with one JSON object and nothing else: {"id": "<capability id>", "confidence": <number between 0 and 1>}
or {"id": null, "confidence": 0} when no capability clearly fits. Use only ids from the list.`

// Choose asks the model. The returned id is always one of candidates.
func (m *Model) Choose(ctx context.Context, text string, candidates []*manifest.Capability, threshold float64) (ModelChoice, error) {
	var list strings.Builder
	allowed := make(map[string]bool, len(candidates))
	for _, c := range candidates {
		allowed[c.ID] = true
		fmt.Fprintf(&list, "- id: %s\n  name: %s\n  description: %s\n", c.ID, c.Skill.Name, c.Skill.Description)
	}
	body, err := json.Marshal(map[string]any{
		"model":       m.model,
		"temperature": 0,
		"messages": []map[string]string{
			{"role": "system", "content": modelInstructions},
			{"role": "user", "content": "Capabilities:\n" + list.String() + "\nMessage:\n" + text},
		},
		"response_format": map[string]string{"type": "json_object"},
	})
	if err != nil {
		return ModelChoice{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(body))
	if err != nil {
		return ModelChoice{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if m.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.apiKey)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return ModelChoice{}, fmt.Errorf("model router: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxModelResponseBytes+1))
	if err != nil {
		return ModelChoice{}, fmt.Errorf("model router: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK || len(raw) > MaxModelResponseBytes {
		return ModelChoice{}, fmt.Errorf("model router: HTTP %d", resp.StatusCode)
	}
	var completion struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &completion); err != nil || len(completion.Choices) == 0 {
		return ModelChoice{}, fmt.Errorf("model router: not a chat completion: %w", ErrNoChoice)
	}
	var answer struct {
		ID         *string  `json:"id"`
		Confidence *float64 `json:"confidence"`
	}
	content := strings.TrimSpace(completion.Choices[0].Message.Content)
	if err := json.Unmarshal([]byte(content), &answer, json.RejectUnknownMembers(true)); err != nil {
		return ModelChoice{}, fmt.Errorf("model router: answer is not the strict JSON asked for: %w", ErrNoChoice)
	}
	if answer.ID == nil || !allowed[*answer.ID] || answer.Confidence == nil ||
		*answer.Confidence < 0 || *answer.Confidence > 1 || *answer.Confidence < threshold {
		return ModelChoice{}, ErrNoChoice
	}
	return ModelChoice{ID: *answer.ID, Confidence: *answer.Confidence}, nil
}
