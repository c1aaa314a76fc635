package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// build is one side of a side-by-side run: a name and a loadgen binary
// built from that commit, whose gateway child serves that commit's code.
type build struct{ name, bin string }

// parseBuilds reads -builds: name=binary,name=binary,...
func parseBuilds(s string) ([]build, error) {
	var bs []build
	for _, f := range strings.Split(s, ",") {
		name, bin, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok || name == "" || bin == "" {
			return nil, fmt.Errorf("-builds %q: want name=loadgen-binary,name=loadgen-binary", s)
		}
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("-builds: %w", err)
		}
		bs = append(bs, build{name, bin})
	}
	if len(bs) == 0 {
		return nil, fmt.Errorf("-builds %q: want one or more name=loadgen-binary, comma-separated", s)
	}
	return bs, nil
}

// cmpRow is one measurement of a side-by-side run: a build's gateway and the
// bare proxy measured just before it, on one binding (and store).
type cmpRow struct {
	round       int
	build, kind string
	px, gw      *gwPhase
}

func (r cmpRow) cpu() time.Duration   { return r.gw.perReq(r.gw.serverCPU) }
func (r cmpRow) pxCPU() time.Duration { return r.px.perReq(r.px.serverCPU) }
func (r cmpRow) allocs() uint64       { return r.gw.allocObjs / uint64(max(r.gw.st.n, 1)) }
func (r cmpRow) ratio() float64       { return float64(r.cpu()) / float64(max(r.pxCPU(), 1)) }

// gatewayCompare measures the gateway of each build side by side on one
// workload (the contexts workload of -mode gateway, -context-tasks tasks in
// each caller's context): rounds of A B A B, each build's gateway a fresh
// child on the server CPU, each phase preceded by the bare proxy's in the
// same round (the floor), both bindings on the memory store, then
// JSON-RPC on a loopback redis-server (unless -no-redis). It prints every
// measurement and each build's spread.
func gatewayCompare(ctx context.Context, o options) error {
	o = gatewayDefaults(o)
	builds, err := parseBuilds(o.builds)
	if err != nil {
		return err
	}
	g, err := setupGateway(ctx, o, builds[0].bin)
	if err != nil {
		return err
	}
	defer g.close()
	proxy, err := startChildOn(ctx, o, serverCPU, "proxy", "", "-upstream", g.upstreamURL)
	if err != nil {
		return err
	}
	defer proxy.stop()
	printGatewaySetup(o, g.caps, g.handlers, len(g.texts), g.candidates)
	fmt.Printf("side by side: %d rounds of %s; %d tasks in each caller's context before each build's phases\n\n",
		o.rounds, buildNames(builds), o.contextTasks)

	var rows []cmpRow
	floor := func(name string, b binding) (*gwPhase, error) {
		bodies := contextBodies(b, g.texts, len(g.bearers), !o.noContexts)
		return gatewayClosed(ctx, o, proxy, g.up, name, sender(g.client, "http://"+proxy.addr+b.path, g.bearers, bodies))
	}
	for round := 1; round <= o.rounds; round++ {
		for _, bd := range builds {
			bo := o
			if o.cpuProfile != "" {
				bo.cpuProfile = o.cpuProfile + "-" + bd.name
			}
			if o.memProfile != "" {
				bo.memProfile = o.memProfile + "-" + bd.name
			}
			gw, err := startGatewayChild(ctx, bo, bd.bin, g.config)
			if err != nil {
				return fmt.Errorf("%s: %w", bd.name, err)
			}
			if err := g.fillContexts(ctx, gw, o.contextTasks); err != nil {
				gw.stop()
				return fmt.Errorf("%s: %w", bd.name, err)
			}
			for _, b := range bindings {
				px, err := floor(fmt.Sprintf("%d %s %s, bare proxy", round, bd.name, b.name), b)
				if err != nil {
					gw.stop()
					return err
				}
				bodies := contextBodies(b, g.texts, len(g.bearers), !o.noContexts)
				p, err := gatewayClosed(ctx, o, gw, g.up, fmt.Sprintf("%d %s %s", round, bd.name, b.name), sender(g.client, "http://"+gw.addr+b.path, g.bearers, bodies))
				if err != nil {
					gw.stop()
					return fmt.Errorf("%s: %w", bd.name, err)
				}
				rows = append(rows, cmpRow{round, bd.name, b.name + ", memory", px, p})
			}
			gw.stop()
			if o.noRedis {
				continue
			}
			px, err := floor(fmt.Sprintf("%d %s JSON-RPC, bare proxy", round, bd.name), bindings[0])
			if err != nil {
				return err
			}
			p, err := gatewayRedis(ctx, bo, g, bd.bin, fmt.Sprintf("%d %s ", round, bd.name))
			if err != nil {
				return fmt.Errorf("%s: %w", bd.name, err)
			}
			rows = append(rows, cmpRow{round, bd.name, bindings[0].name + ", Redis", px, p})
		}
	}
	printCompare(builds, rows)
	return nil
}

func buildNames(bs []build) string {
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.name
	}
	return strings.Join(names, " ")
}

// printCompare prints every measurement, then per case and build the range
// of each figure over the rounds.
func printCompare(builds []build, rows []cmpRow) {
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\nevery phase (load average at the end: %s):\n\n", strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Println("| round | build | binding, store | bare proxy: CPU / request | capgate: CPU / message | **capgate / bare** | capgate: allocations / message (objects · bytes) | capgate req/s |")
	fmt.Println("|---:|---|---|---:|---:|---:|---|---:|")
	for _, r := range rows {
		fmt.Printf("| %d | %s | %s | %s | %s | **%.2f×** | %d · %d | %.0f |\n", r.round, r.build, r.kind, us(r.pxCPU()), us(r.cpu()), r.ratio(),
			r.allocs(), r.gw.allocBytes/uint64(max(r.gw.st.n, 1)), r.gw.st.rate())
	}
	var cases []string
	for _, r := range rows {
		if !slices.Contains(cases, r.kind) {
			cases = append(cases, r.kind)
		}
	}
	fmt.Println("\nper build, over the rounds (min–max; median):")
	fmt.Println()
	fmt.Println("| binding, store | build | allocations / message | CPU / message | **capgate / bare proxy (CPU)** |")
	fmt.Println("|---|---|---|---|---|")
	for _, c := range cases {
		for _, b := range builds {
			var allocs []uint64
			var cpus []time.Duration
			var ratios []float64
			for _, r := range rows {
				if r.kind == c && r.build == b.name {
					allocs, cpus, ratios = append(allocs, r.allocs()), append(cpus, r.cpu()), append(ratios, r.ratio())
				}
			}
			if len(allocs) == 0 {
				continue
			}
			slices.Sort(allocs)
			slices.Sort(cpus)
			slices.Sort(ratios)
			m := len(allocs) / 2
			fmt.Printf("| %s | %s | %d–%d; %d | %s–%s; %s | **%.2f–%.2f×; %.2f×** |\n", c, b.name,
				allocs[0], allocs[len(allocs)-1], allocs[m], us(cpus[0]), us(cpus[len(cpus)-1]), us(cpus[m]),
				ratios[0], ratios[len(ratios)-1], ratios[m])
		}
	}
}
