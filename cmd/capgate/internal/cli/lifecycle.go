package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/lifecycle"
)

func runLifecycle(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "lifecycle", "lifecycle [--config capgate.yaml] [--admin URL] [--now RFC3339] [--json]")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example)")
	adminURL := fs.String("admin", "", "admin listener of the running capgate to read usage from (default: http://<listen.admin>)")
	nowFlag := fs.String("now", "", "report as of this RFC 3339 time (default: now)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	now := time.Now().UTC()
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339, *nowFlag)
		if err != nil {
			return usageErr("--now %q: not an RFC 3339 time", *nowFlag)
		}
		now = t.UTC()
	}
	d, err := loadDeployment(*cfgPath)
	if err != nil {
		return err
	}
	// Usage lives in the store of the running server: a store replicas share
	// (the backend table says which) is read directly (unless --admin is
	// given); one that lives in the server's process alone (memory) is read
	// through the admin listener.
	state, err := openServerState(ctx, d.Config, *adminURL)
	if err != nil {
		return err
	}
	defer state.Close()
	var (
		src  lifecycle.Source
		name string
	)
	if state.Store != nil {
		src, name = lifecycle.Store{Store: state.Store}, "store (config)"
	} else {
		src, name = lifecycle.Admin{URL: state.Admin, Token: state.Token}, "admin "+state.Admin
	}
	rep := lifecycle.Build(ctx, d.Registry(), src, name, now)
	if rep.UsageError != "" {
		_, _ = fmt.Fprintf(env.Stderr, "capgate lifecycle: usage unknown: %s\n", rep.UsageError)
	}
	if *asJSON {
		b, err := json.Marshal(rep, json.Deterministic(true))
		if err != nil {
			return err
		}
		if err := (*jsontext.Value)(&b).Indent(); err != nil {
			return err
		}
		_, err = env.Stdout.Write(append(b, '\n'))
		return err
	}
	return writeLifecycleText(env.Stdout, rep)
}

// dialable turns a listen address into one a client can dial: an empty or
// unspecified host becomes the loopback address.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func writeLifecycleText(w io.Writer, rep lifecycle.Report) error {
	if _, err := fmt.Fprintf(w, "as of %s, usage from %s (window %s)\n", rep.Now.Format(time.RFC3339), rep.UsageSource, rep.Window); err != nil {
		return err
	}
	observed := "observation: unknown (when usage counting began is not known)"
	if rep.ObservedSince != nil {
		observed = fmt.Sprintf("observation: calls counted since %s (%s)", rep.ObservedSince.Format(time.RFC3339), rep.Observed)
	}
	if _, err := fmt.Fprintf(w, "%s\n\n", observed); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if _, err := fmt.Fprintln(tw, "CAPABILITY\tSTATE\tCALLS 30D\tTOTAL\tLAST USED\tREPLACED BY\tSAFE TO REMOVE"); err != nil {
		return err
	}
	for _, e := range rep.Entries {
		calls, total, last := "unknown", "unknown", "unknown"
		if e.UsageKnown {
			calls, total, last = strconv.FormatInt(*e.Calls30d, 10), strconv.FormatInt(*e.Total, 10), "never"
			if e.LastUsed != nil {
				last = e.LastUsed.Format(time.RFC3339)
			}
		}
		if _, err := fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Capability, e.State, calls, total, last, or(e.ReplacedBy, "-"), e.SafeToRemove); err != nil {
			return err
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "\nsafe to remove: %s\n", list(rep.SafeToRemove)); err != nil {
		return err
	}
	var short []string
	for _, e := range rep.Entries {
		if e.SafeToRemove == lifecycle.NotEnoughHistory {
			short = append(short, e.Capability)
		}
	}
	if len(short) > 0 {
		if _, err := fmt.Fprintf(w, "not enough history (no calls seen in a window shorter than %s): %s\n", rep.Window, list(short)); err != nil {
			return err
		}
	}
	if len(rep.UnknownUsage) > 0 {
		if _, err := fmt.Fprintf(w, "unknown (usage could not be read): %s\n", list(rep.UnknownUsage)); err != nil {
			return err
		}
	}
	return nil
}

func list(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
