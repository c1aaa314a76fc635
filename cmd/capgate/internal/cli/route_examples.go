package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/router"
	"github.com/capgate/capgate/sidecar/router/learn"
	"github.com/capgate/capgate/sidecar/tasks"
)

const routeExamplesUsage = `route examples [list|accept|reject] [--config capgate.yaml] [--admin URL] [--capability ID] [--json] [REVIEW-ID... | all]`

// runRouteExamples reviews the candidate routing examples captured from
// clarification answers (router.learn): list shows them per capability,
// near-duplicates merged, with the classifier's current answer for each;
// accept appends the chosen ones to the capability's routing.examples_file
// (a server-side file the manifest names: the change is a file diff, applied
// by the reloader) and forgets them in the store; reject only forgets them.
// Nothing routes differently until a file changes.
//
// The candidates are read (and forgotten) in the config's store when replicas
// share it (the backend table says which), else — the memory store lives in
// the serving process only — through the running capgate's admin listener
// (GET /v1/examples, POST /v1/examples/drop), as with --admin.
func runRouteExamples(ctx context.Context, env Env, args []string) error {
	action := "list"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		action, args = args[0], args[1:]
	}
	if !slices.Contains([]string{"list", "accept", "reject"}, action) {
		return usageErr("route examples: %q is not one of list, accept, reject", action)
	}
	fs := newFlags(env, "route examples", routeExamplesUsage)
	cfgPath := fs.String("config", "capgate.yaml", "the serving capgate's config: its store (or, for memory, its admin listener) holds the candidates")
	adminURL := fs.String("admin", "", "admin listener of the running capgate holding the candidates "+
		"(default with a store replicas do not share, e.g. memory: http://<listen.admin>)")
	capID := fs.String("capability", "", "one capability (required for accept and reject)")
	asJSON := fs.Bool("json", false, "list as JSON")
	maxRefs := 0
	if action != "list" {
		maxRefs = 1 << 20
	}
	if err := parse(fs, args, maxRefs); err != nil {
		return err
	}
	refs := fs.Args()
	if action != "list" && (*capID == "" || len(refs) == 0) {
		return usageErr("route examples %s needs --capability and the review ids to %s (or all)", action, action)
	}
	d, err := loadDeployment(*cfgPath)
	if err != nil {
		return err
	}
	reg := d.Registry()
	ids := []string{*capID}
	if *capID == "" {
		ids = nil
		for _, c := range reg.All() {
			ids = append(ids, c.ID)
		}
	} else if _, ok := reg.Get(*capID); !ok {
		return usageErr("--capability %q is not a capability of the deployment", *capID)
	}
	x, err := openExamples(ctx, d.Config, *adminURL)
	if err != nil {
		return err
	}
	defer x.close()
	ttl := d.Config.Router.Learn.TTL
	if action == "list" {
		ix := router.NewIndex(reg, d.Config.Router.Threshold)
		var out []reviewList
		for _, id := range ids {
			l, err := listExamples(ctx, x, ix, reg, id, ttl)
			if err != nil {
				return err
			}
			if len(l.Groups) > 0 || *capID != "" {
				out = append(out, l)
			}
		}
		if *asJSON {
			return writeJSON(env.Stdout, out)
		}
		return writeReview(env.Stdout, out)
	}
	m, _ := reg.Get(*capID)
	cands, err := x.ExamplesOf(ctx, *capID, ttl)
	if err != nil {
		return usageErr("%s: %v", x.name, err)
	}
	groups, err := pick(learn.Merge(counted(cands)), refs)
	if err != nil {
		return err
	}
	if action == "accept" {
		file, err := examplesFileOf(d.Config, m)
		if err != nil {
			return err
		}
		added, err := appendExamples(file, groups)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(env.Stdout, "%s: %d example(s) added to %s (%d already there)\n"+
			"review the change (e.g. git diff) and deploy it: a running capgate reloads the file; until then nothing routes differently\n",
			*capID, added, file, len(groups)-added); err != nil {
			return err
		}
	}
	var texts []string
	for _, g := range groups {
		texts = append(texts, g.Members...)
	}
	if err := x.DropExamples(ctx, *capID, texts); err != nil {
		return usageErr("%s: %v", x.name, err)
	}
	_, err = fmt.Fprintf(env.Stdout, "%s: %d candidate(s) %sed and removed from the %s\n", *capID, len(texts), action, x.held)
	return err
}

// candidates is what the review needs of where the candidates are: the
// store (tasks.Memory, redisstore.Store) or a running capgate's admin listener.
type candidates interface {
	ExamplesOf(ctx context.Context, capability string, ttl time.Duration) ([]tasks.Example, error)
	DropExamples(ctx context.Context, capability string, texts []string) error
}

// candidateSource is where the review reads and forgets candidates: name
// prefixes its errors ("store", "admin listener http://..."), held says
// where the candidates are, and close lets go of it.
type candidateSource struct {
	candidates
	name, held string
	close      func()
}

// openExamples opens where the config's candidates are: its store when
// replicas share it and adminURL is empty, else the admin listener at
// adminURL (default http://<listen.admin>) of the capgate serving it — the
// memory store lives in that process only.
func openExamples(ctx context.Context, cfg *config.Config, adminURL string) (candidateSource, error) {
	state, err := openServerState(ctx, cfg, adminURL)
	if err != nil {
		return candidateSource{}, err
	}
	if state.Store == nil {
		a, err := newAdminExamples(state.Admin, state.Token, cfg.Router.Learn)
		if err != nil {
			return candidateSource{}, err
		}
		return candidateSource{candidates: a, name: "admin listener " + a.client.Base(),
			held: "store of the capgate at " + a.client.Base(), close: func() {}}, nil
	}
	x, ok := state.Store.(candidates)
	if !ok {
		state.Close()
		return candidateSource{}, usageErr("store %q keeps no candidate examples", cfg.Store)
	}
	return candidateSource{candidates: x, name: "store", held: "store", close: state.Close}, nil
}

// reviewList is one capability's candidates for review.
type reviewList struct {
	Capability   string        `json:"capability"`
	Mode         string        `json:"routing_mode"`
	ExamplesFile string        `json:"examples_file,omitempty"`
	Accepted     int           `json:"accepted"`
	Candidates   int           `json:"candidates"`
	Answers      int           `json:"answers"`
	Groups       []reviewGroup `json:"groups"`
}

// reviewGroup is one group of near-duplicates with the classifier's answer
// for its text today (among every skill, as for a caller entitled to all).
type reviewGroup struct {
	ID         string   `json:"id"`
	Text       string   `json:"text"`
	Count      int      `json:"count"`
	Merged     []string `json:"merged,omitempty"`
	Best       string   `json:"classifier_best"`
	Confidence float64  `json:"classifier_confidence"`
}

func listExamples(ctx context.Context, x candidateSource, ix *router.Index, reg *manifest.Registry, id string, ttl time.Duration) (reviewList, error) {
	m, _ := reg.Get(id)
	l := reviewList{Capability: id, Mode: string(m.Routing.EffectiveMode()), ExamplesFile: m.Routing.ExamplesFile, Accepted: len(m.RoutingExamples)}
	cands, err := x.ExamplesOf(ctx, id, ttl)
	if err != nil {
		return l, usageErr("%s: %v", x.name, err)
	}
	cls := ix.Classifier()
	for _, g := range learn.Merge(counted(cands)) {
		res := cls.Classify(learn.Plain(g.Text), nil)
		l.Candidates += len(g.Members)
		l.Answers += g.Count
		l.Groups = append(l.Groups, reviewGroup{ID: learn.ReviewID(g.Text), Text: g.Text, Count: g.Count,
			Merged: g.Members[1:], Best: res.Best, Confidence: res.Confidence})
	}
	return l, nil
}

// counted is the store's candidates as learn.Merge takes them.
func counted(cands []tasks.Example) []learn.Candidate {
	out := make([]learn.Candidate, len(cands))
	for i, c := range cands {
		out[i] = learn.Candidate{Text: c.Text, Count: c.Count}
	}
	return out
}

// pick is the groups refs name by review id ("all": every group).
func pick(groups []learn.Group, refs []string) ([]learn.Group, error) {
	if len(refs) == 1 && refs[0] == "all" {
		return groups, nil
	}
	var out []learn.Group
	for _, r := range refs {
		i := slices.IndexFunc(groups, func(g learn.Group) bool { return learn.ReviewID(g.Text) == r })
		if i < 0 {
			return nil, usageErr("no candidate with review id %q (list them with capgate route examples --capability ...)", r)
		}
		out = append(out, groups[i])
	}
	return out, nil
}

// examplesFileOf is the file on disk the manifest's routing.examples_file
// names. A manifest without one is refused with what to add: naming the
// file is itself a reviewed change of the manifest.
func examplesFileOf(cfg *config.Config, m *manifest.Capability) (string, error) {
	src := m.Source.File
	ref := m.Routing.ExamplesFile
	if ref == "" {
		return "", usageErr("%s has no routing.examples_file: add `routing: {examples_file: %s.examples.txt}` to %s "+
			"(the reviewed change that lets accepted examples route), then accept again", m.ID, m.ID, src)
	}
	for _, rel := range cfg.Manifests {
		_, name, err := cfg.Open(rel)
		if err != nil || !strings.HasPrefix(src, name+"/") {
			continue
		}
		inside, ok := manifest.ExamplesPath(strings.TrimPrefix(src, name+"/"), ref)
		if !ok {
			break
		}
		dir := rel
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cfg.Dir, rel)
		}
		return filepath.Join(dir, filepath.FromSlash(inside)), nil
	}
	return "", usageErr("%s: the examples file %q of %s is not on disk beside the config", m.ID, ref, src)
}

// appendExamples appends the groups' texts not yet in file (creating it with
// a header) and returns how many it added.
func appendExamples(file string, groups []learn.Group) (int, error) {
	old, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return 0, usageErr("examples file: %v", err)
	}
	have, err := manifest.ParseExamples(file, old)
	if err != nil {
		return 0, usageErr("examples file: %v", err)
	}
	var b strings.Builder
	if len(old) == 0 {
		b.WriteString("# Routing examples accepted with `capgate route examples accept` (server-side; never in a card).\n" +
			"# One per line; review changes like any config change.\n")
	} else if !strings.HasSuffix(string(old), "\n") {
		b.WriteString("\n")
	}
	added := 0
	for _, g := range groups {
		t := strings.TrimSpace(g.Text)
		if t == "" || slices.Contains(have, t) {
			continue
		}
		have = append(have, t)
		b.WriteString(t)
		b.WriteString("\n")
		added++
	}
	if len(have) > manifest.MaxRoutingExamples {
		return 0, usageErr("examples file %s would hold more than %d examples", file, manifest.MaxRoutingExamples)
	}
	if added == 0 {
		return 0, nil
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, usageErr("examples file: %v", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		_ = f.Close()
		return 0, usageErr("examples file: %v", err)
	}
	if err := f.Close(); err != nil {
		return 0, usageErr("examples file: %v", err)
	}
	return added, nil
}

// writeReview prints the candidates per capability.
func writeReview(w io.Writer, lists []reviewList) error {
	var b strings.Builder
	if len(lists) == 0 {
		b.WriteString("no candidate examples (router.learn.capture off, or no clarification answered yet)\n")
	}
	for _, l := range lists {
		file := "no routing.examples_file"
		if l.ExamplesFile != "" {
			file = fmt.Sprintf("examples file %s, %d accepted", l.ExamplesFile, l.Accepted)
		}
		fmt.Fprintf(&b, "%s (routing %s; %s): %d candidate(s) from %d answer(s), %d after merging near-duplicates\n",
			l.Capability, l.Mode, file, l.Candidates, l.Answers, len(l.Groups))
		for _, g := range l.Groups {
			verdict := "routes elsewhere"
			if g.Best == l.Capability {
				verdict = "already its best"
			}
			fmt.Fprintf(&b, "  %s  x%-3d classifier: %s %.2f (%s)  %q\n", g.ID, g.Count, orNone(g.Best), g.Confidence, verdict, g.Text)
			for _, m := range g.Merged {
				fmt.Fprintf(&b, "      merged: %q\n", m)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
