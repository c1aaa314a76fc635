package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/capgate/capgate/policy/access"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/engine"
)

func runAccessReplay(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "access replay", "access replay --head SOURCE [--base SOURCE] [--since T] [--until T] [--allow-loss] [--allow-gain] [--json|--markdown] [--html report.html] [--decisions FILE]... [FILE...]\n"+
		"SOURCE: a deployment config, an OPA bundle built by `capgate compile`, or git:REV[:path/to/capgate.yaml]; T: RFC 3339 (2026-12-03T15:00:00Z) or a date (2026-12-03)\n"+
		"Flags come first: the files after the last flag are read too (a shell glob), and a flag after a file is not a flag")
	var files listFlag
	fs.Var(&files, "decisions", "a decision log: capgate's console log (JSON lines) or OPA decision-log uploads (gzip'd JSON arrays); repeatable")
	headSpec := fs.String("head", "", "the deployment to replay the recorded decisions against")
	baseSpec := fs.String("base", "", "the deployment that served them: recorded decisions it does not reproduce are reported apart")
	sinceArg := fs.String("since", "", "replay only decisions recorded at or after T")
	untilArg := fs.String("until", "", "replay only decisions recorded at or before T")
	allowLoss := fs.Bool("allow-loss", false, "exit 0 even when a recorded allow would be refused")
	allowGain := fs.Bool("allow-gain", false, "exit 0 even when a recorded refusal would be allowed")
	f := accessFlags{
		asJSON:     fs.Bool("json", false, "print JSON"),
		asMarkdown: fs.Bool("markdown", false, "print Markdown"),
		html:       fs.String("html", "", "write a self-contained HTML report to this file (stdout then says only where, unless --json or --markdown)"),
	}
	if err := parse(fs, args, 1<<16); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	for _, a := range fs.Args() {
		if strings.HasPrefix(a, "-") {
			return usageErr("%s after a file: flags come before the files (Go's flag parsing stops at the first file), e.g. "+
				"access replay --head SOURCE --decisions a.log b.log", a)
		}
	}
	files = append(files, fs.Args()...)
	if len(files) == 0 || *headSpec == "" {
		return usageErr("--decisions and --head are required")
	}
	since, err := replayTime("--since", *sinceArg)
	if err != nil {
		return err
	}
	until, err := replayTime("--until", *untilArg)
	if err != nil {
		return err
	}
	head, err := replayEngine(ctx, *headSpec)
	if err != nil {
		return err
	}
	var base access.Answerer
	if *baseSpec != "" {
		if base, err = replayEngine(ctx, *baseSpec); err != nil {
			return err
		}
	}
	r := access.NewReplay(head, base, since, until)
	for _, path := range files {
		if err := replayFile(ctx, r, path); err != nil {
			return err
		}
	}
	rep := r.Report()
	rep.Provenance = provenance(*headSpec)
	if err := f.write(env,
		func(w io.Writer) error { return access.WriteReplayText(w, rep) },
		func(w io.Writer) error { return access.WriteReplayMarkdown(w, rep) },
		func(w io.Writer) error { return access.WriteReplayJSON(w, rep) },
		func(w io.Writer) error { return access.WriteReplayHTML(w, rep) }); err != nil {
		return err
	}
	if losses, gains := rep.Losses(), rep.Gains(); (losses > 0 && !*allowLoss) || (gains > 0 && !*allowGain) {
		return checkFailed("the head changes recorded decisions: %d allowed → refused, %d refused → allowed", losses, gains)
	}
	return nil
}

// replayTime reads --since or --until.
func replayTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, usageErr("%s %q: want RFC 3339 (2026-12-03T15:00:00Z) or a date (2026-12-03)", flag, v)
}

// replayEngine prepares the policy engine of a source, as the server would.
func replayEngine(ctx context.Context, spec string) (*engine.Engine, error) {
	s, err := loadSide(ctx, spec, func() (config.Auth, error) { return config.Auth{}, nil })
	if err != nil {
		return nil, err
	}
	e, err := engine.New(ctx, s.snap)
	if err != nil {
		return nil, fmt.Errorf("prepare policy: %w", err)
	}
	return e, nil
}

// replayFile replays every decision event of one log.
func replayFile(ctx context.Context, r *access.Replay, path string) error {
	file, err := os.Open(path)
	if err != nil {
		return usageErr("read decisions: %v", err)
	}
	defer func() { _ = file.Close() }()
	err = eachDecision(file, func(e *loggedDecision) error {
		if strings.HasPrefix(e.Result.Rule, access.QuotaRuleDecided) {
			r.Counted()
		}
		return r.Event(ctx, recordedQuestions(e)...)
	})
	if err != nil {
		return logErr(path, err)
	}
	return nil
}

// recordedQuestions are the entitlement questions an event recorded: the
// capability's (when the decision evaluated it) and a capability the
// caller requested by skill hint. An event with truncated scopes records
// none that can be asked again.
func recordedQuestions(e *loggedDecision) []access.Recorded {
	in := e.Input
	str := func(k string) string { s, _ := in[k].(string); return s }
	if truncated, _ := in["scopes_truncated"].(bool); truncated {
		return nil
	}
	capability, requested := str("capability"), str("requested")
	hasCap, hasReq := e.Result.Entitled != nil && capability != "", e.Result.RequestedEntitled != nil && requested != ""
	if !hasCap && !hasReq {
		return nil
	}
	authenticated, _ := in["authenticated"].(bool)
	q := access.Recorded{
		DecisionID: e.DecisionID,
		Revision:   e.Bundles["capgate"].Revision,
		Caller: access.Caller{Issuer: str("issuer"), Authenticated: authenticated, Subject: str("principal"),
			Tenant: str("tenant"), Scopes: stringList(in["scopes"])},
		Operation: str("operation"),
	}
	q.Time, _ = time.Parse(time.RFC3339Nano, e.Timestamp)
	var qs []access.Recorded
	if hasCap {
		c := q
		c.Capability, c.Layer, c.Entitled, c.Rules = capability, str("layer"), *e.Result.Entitled, reasons(e.Result.Rules)
		qs = append(qs, c)
	}
	if hasReq {
		c := q
		c.Capability, c.Layer, c.Entitled, c.Rules = requested, "hint", *e.Result.RequestedEntitled, reasons(e.Result.RequestedRules)
		qs = append(qs, c)
	}
	return qs
}

func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func reasons(rs []loggedRule) []engine.Reason {
	out := make([]engine.Reason, len(rs))
	for i, r := range rs {
		out[i] = engine.Reason{Rule: r.Reason, Effect: r.Effect}
	}
	return out
}
