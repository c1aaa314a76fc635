package access

import (
	"bufio"
	"fmt"
	"io"
)

// WriteCheckText writes the outcome of an expectations check: one line per
// expectation, and under each that failed the cells that broke it with the
// rules that decided them.
func WriteCheckText(w io.Writer, r *Report) error {
	bw := bufio.NewWriter(w)
	for _, l := range r.Provenance.Lines() {
		_, _ = fmt.Fprintln(bw, l)
	}
	_, _ = fmt.Fprintf(bw, "policy revision: %s\n", r.Revision)
	if r.File != "" {
		_, _ = fmt.Fprintf(bw, "expectations: %s\n", r.File)
	}
	failed := r.Failed()
	_, _ = fmt.Fprintf(bw, "%d %s, %d held, %d failed\n\n", len(r.Outcomes), plural(len(r.Outcomes), "expectation", "expectations"), len(r.Outcomes)-failed, failed)
	for _, o := range r.Outcomes {
		status := "ok  "
		if !o.Held() {
			status = "FAIL"
		}
		where := ""
		if r.File != "" {
			where = fmt.Sprintf(" (%s:%d)", r.File, o.Line)
		}
		_, _ = fmt.Fprintf(bw, "%s  %s%s: %d %s\n", status, o.Name, where, o.Checks, plural(o.Checks, "check", "checks"))
		if o.Problem != "" {
			_, _ = fmt.Fprintf(bw, "        %s\n", o.Problem)
		}
		for _, v := range o.Violations {
			_, _ = fmt.Fprintf(bw, "        %s\n", v)
		}
	}
	return bw.Flush()
}

// WriteCheckJSON writes the report as JSON.
func WriteCheckJSON(w io.Writer, r *Report) error {
	type out struct {
		Provenance *provenanceJSON `json:"provenance,omitempty"`
		Revision   string          `json:"revision"`
		File       string          `json:"file,omitempty"`
		Failed     int             `json:"failed"`
		Outcomes   []Outcome       `json:"expectations"`
	}
	return writeJSON(w, out{Provenance: r.Provenance.json(), Revision: r.Revision, File: r.File, Failed: r.Failed(), Outcomes: r.Outcomes})
}
