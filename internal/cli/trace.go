package cli

import (
	"fmt"
	"os"
	"strings"

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
	w, err := trace.Create(path, trace.Options{Max: max, Scrub: sc.ScrubJSON, Append: l.Bool(launch.FlagTraceAppend)})
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

// traceCommand is `acp-bridge trace view TRACE -o FILE`.
func traceCommand() *cli.Command {
	return &cli.Command{
		Name:         "trace",
		Usage:        "work with a trace recorded by --trace",
		OnUsageError: onUsageError,
		Subcommands: []*cli.Command{{
			Name:         "view",
			Usage:        "write a trace as one self-contained HTML sequence diagram",
			ArgsUsage:    "TRACE",
			OnUsageError: onUsageError,
			Flags: []cli.Flag{&cli.StringFlag{
				Name:    "output",
				Aliases: []string{"o"},
				Usage:   "write the page to `FILE` (default: TRACE.html)",
			}},
			Action: traceViewAction,
		}},
	}
}

func traceViewAction(c *cli.Context) error {
	// The flag package stops at the first argument, and the usual order
	// is TRACE -o FILE: take -o after TRACE too.
	in, out := "", c.String("output")
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case (a == "-o" || a == "--output") && i+1 < len(args):
			out = args[i+1]
			i++
		case strings.HasPrefix(a, "-o=") || strings.HasPrefix(a, "--output="):
			_, out, _ = strings.Cut(a, "=")
		case in == "" && !strings.HasPrefix(a, "-"):
			in = a
		default:
			return launch.Usagef("trace view takes one TRACE file and -o FILE, not %q: acp-bridge trace view TRACE -o trace.html", a)
		}
	}
	if in == "" {
		return launch.Usagef("trace view needs the TRACE file: acp-bridge trace view TRACE -o trace.html")
	}
	if out == "" {
		out = in + ".html"
	}
	n, err := trace.WriteViewFile(in, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "acp-bridge: wrote %s (%d records)\n", out, n)
	return nil
}
