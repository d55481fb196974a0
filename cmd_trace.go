package main

import (
	"fmt"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/bridge/trace"
	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
)

// startTrace starts the --trace recorder on b, every line scrubbed of the
// agent's secrets. The returned func flushes and closes it; it does nothing
// without --trace.
func startTrace(c *cli.Context, b *bridge.Bridge, sc *launch.Scrubber) (func(hclog.Logger), error) {
	l := lineage{c}
	path := l.String(launch.FlagTrace)
	if path == "" {
		return func(hclog.Logger) {}, nil
	}
	max, err := launch.TraceMax(l.String(launch.FlagTraceMax))
	if err != nil {
		return nil, err
	}
	w, err := trace.Create(path, trace.Options{Max: max, Scrub: sc.Scrub})
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", launch.FlagTrace, err)
	}
	b.AddTap(w.Tap)
	return func(logger hclog.Logger) {
		if err := w.Close(); err != nil {
			logger.Error("trace not complete", "file", path, "error", err)
		}
	}, nil
}
