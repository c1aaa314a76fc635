// Command routetune runs the classifier's tuning harness on the CLINC150 dev
// data: how the classifier's defaults and its confidence were chosen (see
// docs/routing.md, "How it was tuned"). It prints figures and asserts
// nothing; its package's test asserts the small-set targets on the cases the
// harness draws (smallset.go).
//
//	go run ./test/routetune [-data ../shared/data/routing] tune|calib|calib-cos|smallsets|usage
//
// tune walks the parameters one at a time, calib fits the confidence
// logistic (calib-cos: for the cosine-only fallback), smallsets refits the
// small-set correction and shows the finance example's public skills, usage
// shows the parameters at ten examples per skill on folds of the learning
// curve's usage block (usage.go).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/router/classifier"
	"github.com/capgate/capgate/test/routingdata"
)

// financePublic are the finance example's skills an authenticated caller
// without scopes may use.
var financePublic = []string{"extract-invoice-fields", "lookup-invoice", "lookup-invoice-v1"}

func main() {
	data := flag.String("data", filepath.Join("..", "shared", "data", "routing"), "folder holding manifests.json and dev.jsonl")
	flag.Usage = func() {
		_, _ = fmt.Fprintln(flag.CommandLine.Output(), "usage: routetune [-data DIR] tune|calib|calib-cos|smallsets|usage")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *data); err != nil {
		fmt.Fprintln(os.Stderr, "routetune:", err)
		os.Exit(1)
	}
}

func run(mode, data string) error {
	docs, cases, err := load(data)
	if err != nil {
		return err
	}
	switch mode {
	case "tune":
		tune(os.Stdout, docs, cases)
	case "calib":
		calibrate(os.Stdout, docs, cases, false)
	case "calib-cos":
		calibrate(os.Stdout, docs, cases, true)
	case "usage":
		usageTune(os.Stdout, docs, cases)
	case "smallsets":
		sub, err := fs.Sub(manifests.FS, "finance/capabilities")
		if err != nil {
			return err
		}
		reg, err := manifest.Load([]manifest.Dir{{FS: sub, Name: "capabilities"}}, manifest.Options{})
		if err != nil {
			return fmt.Errorf("finance example: %w", err)
		}
		return tuneSmallSets(os.Stdout, docs, cases, docsOf(reg.All()), financePublic)
	default:
		return fmt.Errorf("unknown mode %q: want tune, calib, calib-cos, smallsets or usage", mode)
	}
	return nil
}

// load reads the skills (manifests.json, a JSON array of manifests) and the
// dev cases (dev.jsonl: {"text", "expect": id or null} per line).
func load(dir string) ([]classifier.Doc, []classifier.Case, error) {
	raw, dev, err := routingdata.Read(dir)
	if err != nil {
		return nil, nil, err
	}
	return parse(raw, dev)
}

// parse is load of data already read.
func parse(raw []byte, dev []routingdata.Case) ([]classifier.Doc, []classifier.Case, error) {
	reg, err := manifest.LoadJSONArray("manifests.json", raw, manifest.Options{})
	if err != nil {
		return nil, nil, err
	}
	if len(dev) == 0 {
		return nil, nil, errors.New("dev.jsonl: no cases")
	}
	cases := make([]classifier.Case, len(dev))
	for i, c := range dev {
		cases[i] = classifier.Case{Text: c.Text, Expect: c.Expect}
	}
	return docsOf(reg.All()), cases, nil
}

// docsOf is what the classifier reads of each capability, as the router
// gives it.
func docsOf(caps []manifest.Capability) []classifier.Doc {
	docs := make([]classifier.Doc, len(caps))
	for i, c := range caps {
		docs[i] = classifier.Doc{ID: c.ID, Name: c.Skill.Name, Description: c.Skill.Description, Tags: c.Skill.Tags, Examples: c.Skill.Examples}
	}
	return docs
}
