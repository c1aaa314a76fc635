package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
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
		if reqs[i], err = encode(checkRequest(tok, fmt.Sprintf("ctx-%04d-invoices", i), i)); err != nil {
			return err
		}
	}
	printSetup(o, len(reqs[0]))
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
	return nil
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
	t, err := dial(c.addr, o.conns)
	if err != nil {
		return nil, 0, err
	}
	defer t.close()
	p := &phase{name: "capgate"}
	fmt.Printf("%-8s closed loop (%s) ... ", "capgate", filepath.Base(filepath.Dir(config)))
	var s0, g0 time.Duration
	st, err := closedLoopMarked(ctx, checks(t, reqs), o.concurrency, o.warmup, o.duration, func(begin bool) {
		s, _ := cpuTime(c.cmd.Process.Pid)
		g, _ := cpuTime(os.Getpid())
		if begin {
			s0, g0 = s, g
			return
		}
		p.serverCPU, p.genCPU = s-s0, g-g0
	})
	if err != nil {
		return nil, 0, err
	}
	p.st = st
	fmt.Printf("%.0f checks/s (errors %d)\n", st.rate(), st.errors)
	if st.errors > 0 {
		return nil, 0, fmt.Errorf("capgate: %d failed checks, first: %v", st.errors, st.firstErr)
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
	var offRate, onRate float64
	var offCPU, onCPU time.Duration
	for _, r := range rows {
		fmt.Printf("| %d | %s | %.0f | %.2f | %s | %.0f |\n", r.round, r.side, r.p.st.rate(), r.p.st.rate()/floor.st.rate(), us(r.p.cpuPerCheck()), r.counted)
		if r.side == "off" {
			offRate, offCPU = offRate+r.p.st.rate(), offCPU+r.p.cpuPerCheck()
		} else {
			onRate, onCPU = onRate+r.p.st.rate(), onCPU+r.p.cpuPerCheck()
		}
	}
	if offRate > 0 && onCPU > 0 {
		fmt.Printf("| both rounds | **on / off** | **%.0f %%** | | **%.0f %%** of off's CPU per check | |\n", onRate/offRate*100, float64(onCPU)/float64(offCPU)*100)
	}
}
