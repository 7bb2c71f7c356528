// dashboard-check parses Grafana dashboards strictly with Grafana's own
// schema (the foundation SDK): an unknown field, a wrong type or a missing
// required field anywhere in the dashboard, its panels, their options and
// field configs, or their Prometheus queries is an error. Then it validates
// the parsed dashboard. Used by `make test` (tests/dashboard_schema.rs).
//
//	go run . FILE.json...
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dashboard-check FILE.json...")
		os.Exit(2)
	}
	// Panel types and query types beyond the core schema: timeseries,
	// heatmap, stat, the Prometheus query, ...
	plugins.RegisterDefaultPlugins()
	failed := false
	for _, path := range os.Args[1:] {
		if err := check(path); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func check(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	raw, err = withoutExportEnvelope(raw)
	if err != nil {
		return err
	}
	var board dashboard.Dashboard
	if err := orNil(board.UnmarshalJSONStrict(raw)); err != nil {
		return fmt.Errorf("not a dashboard by Grafana's schema: %w", err)
	}
	if err := orNil(board.Validate()); err != nil {
		return fmt.Errorf("invalid: %w", err)
	}
	fmt.Printf("%s: %d panels, valid by grafana-foundation-sdk\n", path, len(board.Panels))
	return nil
}

// withoutExportEnvelope drops `__inputs` and `__requires`: the envelope of a
// dashboard exported for sharing (the data sources to ask for and the
// plugins needed on import), which Grafana strips on import and which is
// not part of the dashboard's schema.
func withoutExportEnvelope(raw []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	delete(fields, "__inputs")
	delete(fields, "__requires")
	return json.Marshal(fields)
}

// orNil turns the SDK's empty error list (a nil cog.BuildErrors, which is a
// non-nil error) into no error.
func orNil(err error) error {
	if errs, ok := err.(cog.BuildErrors); ok && len(errs) == 0 {
		return nil
	}
	return err
}
