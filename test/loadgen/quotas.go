package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
)

// benchPlan is the quota the "quotas on" phases count every call against:
// a budget no run reaches (so nothing is refused and the phases do the
// same work but the count), per caller, failing closed. One plan is one
// counter (one round trip to Redis) per check.
const benchPlan = `quotas:
  plans:
    - id: bench
      budget: {calls: 1000000000, per: 24h}
      on_store_error: closed
`

// quotasBench measures what counting quotas on a loopback Redis costs
// (issue #34): ext_authz checks/s and CPU per check with the finance
// example's store on Redis, without quotas and with one plan, against the
// no-op floor of the same run; then the gateway's CPU per routed message
// the same two ways. Off and on alternate twice so a machine that gets
// busier during the run moves both.
func quotasBench(ctx context.Context, o options) error {
	if err := lookRedis(); err != nil {
		return err
	}
	key, kid, err := demoKey()
	if err != nil {
		return err
	}
	reqs := make([]marshalled, max(o.tokens, 1))
	for i := range reqs {
		tok, err := mint(key, kid, fmt.Sprintf("orchestrator-%d@partner", i), "partner-co", "recon.run invoices.read")
		if err != nil {
			return err
		}
		if reqs[i], err = encode(chargedRequest(tok, i)); err != nil {
			return err
		}
	}
	printSetup(o, len(reqs[0]))
	fmt.Println("quotas: the Check is the finance example's extension method finance/explainVariance (admission charges it: its capability is known before routing; a new SendMessage is charged by the gateway once routed, not by ext_authz)")
	dir, err := os.MkdirTemp("", "loadgen-quotas-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.Mkdir(filepath.Join(dir, "redis"), 0o755); err != nil {
		return err
	}
	rds, err := startRedis(filepath.Join(dir, "redis"))
	if err != nil {
		return err
	}
	defer rds.kill()
	off, on, err := quotaConfigs(dir, "redis://"+rds.addr+"/0")
	if err != nil {
		return err
	}

	floor, err := closedPhase(ctx, o, "noop", "", reqs)
	if err != nil {
		return err
	}
	var rows []quotaRow
	for round := 1; round <= 2; round++ {
		for _, side := range []struct {
			name, config string
		}{{"off", off}, {"on", on}} {
			p, counted, err := quotaPhase(ctx, o, side.config, reqs)
			if err != nil {
				return err
			}
			rows = append(rows, quotaRow{round: round, side: side.name, p: p, counted: counted})
		}
	}
	printQuotaTable(floor, rows)

	// The gateway: a new SendMessage, routed to reconcile-invoice and
	// charged once routed (a once-mark of its messageId and the GCRA
	// counter: two round trips), against the same without quotas.
	bearers := make([]string, len(reqs))
	for i := range bearers {
		tok, err := mint(key, kid, fmt.Sprintf("orchestrator-%d@partner", i), "partner-co", "recon.run invoices.read")
		if err != nil {
			return err
		}
		bearers[i] = "Bearer " + tok
	}
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		MaxIdleConns: 4 * o.concurrency, MaxIdleConnsPerHost: 2 * o.concurrency, DisableCompression: true,
	}}
	var gws []quotaRow
	for round := 1; round <= 2; round++ {
		for _, side := range []struct {
			name, config string
		}{{"off", off}, {"on", on}} {
			p, counted, err := gatewayQuotaPhase(ctx, o, client, side.config, bearers)
			if err != nil {
				return err
			}
			gws = append(gws, quotaRow{round: round, side: side.name, p: p, counted: counted})
		}
	}
	printGatewayQuotaTable(gws)
	return nil
}

// gatewayQuotaPhase measures the gateway child on config at maximum
// throughput: new SendMessages (each its own messageId) routed to the
// finance example's built-in echo handler.
func gatewayQuotaPhase(ctx context.Context, o options, client *http.Client, config string, bearers []string) (*phase, float64, error) {
	c, err := startChild(ctx, o, "gateway", config)
	if err != nil {
		return nil, 0, err
	}
	defer c.stop()
	url := "http://" + c.addr + "/"
	send := func(ctx context.Context, _, i int) error {
		body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"loadgen-q-` +
			strconv.FormatUint(sentMessages.Add(1), 10) + `","role":"ROLE_USER","parts":[{"text":"reconcile this against the PO"},` +
			`{"raw":"JVBERi0xLjQ=","mediaType":"application/pdf","filename":"inv.pdf"}]}}}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set("Authorization", bearers[i%len(bearers)])
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			return err
		}
		if res.StatusCode != http.StatusOK || strings.Contains(string(b), `"error"`) {
			return fmt.Errorf("status %d: %.300s", res.StatusCode, b)
		}
		return nil
	}
	p := &phase{name: "gateway"}
	fmt.Printf("%-8s closed loop (%s) ... ", "gateway", filepath.Base(filepath.Dir(config)))
	var s0 time.Duration
	st, err := closedLoopMarked(ctx, send, o.concurrency, o.warmup, o.duration, func(begin bool) {
		sc, _ := cpuTime(c.cmd.Process.Pid)
		if begin {
			s0 = sc
			return
		}
		p.serverCPU = sc - s0
	})
	if err != nil {
		return nil, 0, err
	}
	p.st = st
	fmt.Printf("%.0f messages/s (errors %d)\n", st.rate(), st.errors)
	if st.errors > 0 {
		return nil, 0, fmt.Errorf("gateway: %d failed messages, first: %v", st.errors, st.firstErr)
	}
	counted, err := scrapeCounter(ctx, c.admin, "capgate_quota_calls_total", `result="admitted"`)
	return p, counted, err
}

func printGatewayQuotaTable(rows []quotaRow) {
	fmt.Println("\nthe gateway, a new SendMessage routed to reconcile-invoice (built-in echo), task store on the same redis-server, quotas off and on:")
	fmt.Println()
	fmt.Println("| round | quotas | messages/s | server CPU per message | calls counted |")
	fmt.Println("|---|---|---:|---:|---:|")
	for _, r := range rows {
		fmt.Printf("| %d | %s | %.0f | %s | %.0f |\n", r.round, r.side, r.p.st.rate(), us(r.p.cpuPerCheck()), r.counted)
	}
	if rate, cpu, ok := onOverOff(rows); ok {
		fmt.Printf("| both rounds | **on / off** | **%.0f %%** | **%.0f %%** of off's CPU per message | |\n", rate*100, cpu*100)
	}
}

// onOverOff is the rate and the CPU per call of the rounds with quotas on,
// summed over the rounds, over those with quotas off (ok: off measured both).
func onOverOff(rows []quotaRow) (rate, cpu float64, ok bool) {
	var offRate, onRate float64
	var offCPU, onCPU time.Duration
	for _, r := range rows {
		if r.side == "off" {
			offRate, offCPU = offRate+r.p.st.rate(), offCPU+r.p.cpuPerCheck()
		} else {
			onRate, onCPU = onRate+r.p.st.rate(), onCPU+r.p.cpuPerCheck()
		}
	}
	if offRate <= 0 || offCPU <= 0 {
		return 0, 0, false
	}
	return onRate / offRate, float64(onCPU) / float64(offCPU), true
}

// quotaConfigs writes the finance example on store twice: without quotas
// (off) and with benchPlan (on).
func quotaConfigs(dir, store string) (off, on string, err error) {
	for _, side := range []string{"off", "on"} {
		d := filepath.Join(dir, side)
		if err := writeFinance(d); err != nil {
			return "", "", err
		}
		cfg := filepath.Join(d, "capgate.yaml")
		raw, err := os.ReadFile(cfg)
		if err != nil {
			return "", "", err
		}
		if !strings.Contains(string(raw), "store: memory") {
			return "", "", fmt.Errorf("the finance example's capgate.yaml has no \"store: memory\" to replace")
		}
		s := strings.ReplaceAll(string(raw), "store: memory", "store: "+store)
		s = regexp.MustCompile(`(?ms)^quotas:\n(?:[ #].*\n|\n)*`).ReplaceAllString(s, "")
		if side == "on" {
			s += benchPlan
		}
		if err := writeConfig(cfg, s); err != nil {
			return "", "", err
		}
		if side == "off" {
			off = cfg
		} else {
			on = cfg
		}
	}
	return off, on, nil
}

type quotaRow struct {
	round   int
	side    string
	p       *phase
	counted float64 // capgate_quota_calls_total{result="admitted"} at the end
}

// quotaPhase is closedPhase on config, reading how many calls the child
// counted against quotas (so "on" is shown to count every check).
func quotaPhase(ctx context.Context, o options, config string, reqs []marshalled) (*phase, float64, error) {
	c, err := startChild(ctx, o, "capgate", config)
	if err != nil {
		return nil, 0, err
	}
	defer c.stop()
	p, err := measureClosed(ctx, o, c, "capgate", filepath.Base(filepath.Dir(config)), reqs)
	if err != nil {
		return nil, 0, err
	}
	counted, err := scrapeCounter(ctx, c.admin, "capgate_quota_calls_total", `result="admitted"`)
	return p, counted, err
}

// scrapeCounter sums the samples of metric whose labels contain match.
func scrapeCounter(ctx context.Context, admin, metric, match string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") || !strings.Contains(line, match) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}

func printQuotaTable(floor *phase, rows []quotaRow) {
	fmt.Println("\next_authz with the task store on a loopback redis-server, quotas off and on (one plan: one GCRA counter per check):")
	fmt.Println()
	fmt.Println("| round | quotas | checks/s | / floor | server CPU per check | calls counted |")
	fmt.Println("|---|---|---:|---:|---:|---:|")
	fmt.Printf("| | no-op floor | %.0f | 1.00 | %s | |\n", floor.st.rate(), us(floor.cpuPerCheck()))
	for _, r := range rows {
		fmt.Printf("| %d | %s | %.0f | %.2f | %s | %.0f |\n", r.round, r.side, r.p.st.rate(), r.p.st.rate()/floor.st.rate(), us(r.p.cpuPerCheck()), r.counted)
	}
	if rate, cpu, ok := onOverOff(rows); ok {
		fmt.Printf("| both rounds | **on / off** | **%.0f %%** | | **%.0f %%** of off's CPU per check | |\n", rate*100, cpu*100)
	}
}

// varianceBody calls the finance example's extension method, served by
// reconcile-invoice: a call ext_authz charges against its quotas.
const varianceBody = `{"jsonrpc":"2.0","id":"req-7f3a9d","method":"finance/explainVariance","params":{"invoice":"INV-20931"}}`

// chargedRequest is checkRequest for finance/explainVariance, with its
// extension activated.
func chargedRequest(token string, n int) *authv3.CheckRequest {
	r := checkRequest(token, "", n)
	h := r.GetAttributes().GetRequest().GetHttp()
	h.RawBody, h.Size = []byte(varianceBody), int64(len(varianceBody))
	h.Headers["content-length"] = strconv.Itoa(len(varianceBody))
	h.Headers["a2a-extensions"] = "https://example.com/ext/variance/v1"
	return r
}
