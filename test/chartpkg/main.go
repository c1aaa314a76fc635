// Command chartpkg builds the Helm chart's release artifact, as `make chart`
// runs it: it writes the chart's README from its values schema
// (envoy/chartdoc), checks its metadata and renders it with Helm's engine and
// the finance example's values (schema and strict mode; the chart's defaults
// alone do not deploy), and packages it as `helm package` does (Helm's own
// chartutil.Save), into <out>/capgate-<version>.tgz.
//
//	go run ./test/chartpkg -chart envoy/helm/capgate -out dist
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"

	"github.com/capgate/capgate/envoy/chartdoc"
)

func main() {
	dir := flag.String("chart", "envoy/helm/capgate", "the chart's folder")
	out := flag.String("out", "dist", "where to write capgate-<version>.tgz")
	readmeOnly := flag.Bool("readme", false, "only write the chart's README.md")
	flag.Parse()
	if err := run(*dir, *out, *readmeOnly); err != nil {
		fmt.Fprintln(os.Stderr, "chartpkg:", err)
		os.Exit(1)
	}
}

func run(dir, out string, readmeOnly bool) error {
	ch, err := loader.Load(dir)
	if err != nil {
		return err
	}
	readme, err := chartdoc.README(chartdoc.Chart{Name: ch.Metadata.Name, Description: ch.Metadata.Description, Version: ch.Metadata.Version, AppVersion: ch.Metadata.AppVersion}, ch.Schema, ch.Values)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), readme, 0o644); err != nil { //nolint:gosec // a README
		return err
	}
	fmt.Println("chart: wrote", filepath.Join(dir, "README.md"))
	if readmeOnly {
		return nil
	}
	// The README just written goes into the package.
	if ch, err = loader.Load(dir); err != nil {
		return err
	}
	if err := lint(ch, dir); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil { //nolint:gosec // a build folder
		return err
	}
	path, err := chartutil.Save(ch, out)
	if err != nil {
		return err
	}
	fmt.Println("chart:", path)
	return nil
}

// lint checks the chart's metadata and renders it as `helm template -f
// examples/finance.values.yaml` does: values checked against the schema,
// templates in strict mode (a missing value is an error).
func lint(ch *chart.Chart, dir string) error {
	if err := ch.Validate(); err != nil {
		return fmt.Errorf("chart metadata: %w", err)
	}
	vals, err := common.ReadValuesFile(filepath.Join(dir, "examples", "finance.values.yaml"))
	if err != nil {
		return err
	}
	rv, err := util.ToRenderValues(ch, vals.AsMap(), common.ReleaseOptions{Name: "finance-agent", Namespace: "finance-agent", IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		return err
	}
	if _, err := (engine.Engine{Strict: true}).RenderWithContext(context.Background(), ch, rv); err != nil {
		return fmt.Errorf("render with examples/finance.values.yaml: %w", err)
	}
	return nil
}
