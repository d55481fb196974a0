package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/toolkit/trace"
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
		}, {
			Name:         "export",
			Usage:        "write a trace as OpenTelemetry spans (OTLP/JSON, GenAI conventions: one span per turn and per tool call)",
			ArgsUsage:    "TRACE",
			OnUsageError: onUsageError,
			Flags: []cli.Flag{&cli.StringFlag{
				Name:    "output",
				Aliases: []string{"o"},
				Usage:   "write the OTLP/JSON to `FILE` (default: TRACE.otlp.json)",
			}},
			Action: traceExportAction,
		}},
	}
}

// traceExportAction is `acp-bridge trace export TRACE -o FILE`.
func traceExportAction(c *cli.Context) error {
	in, out, err := traceInOut(c, "export", ".otlp.json")
	if err != nil {
		return err
	}
	recs, err := trace.ReadFile(in)
	if err != nil {
		return err
	}
	st, err := os.Stat(in)
	if err != nil {
		return err
	}
	if fi, err := os.Lstat(out); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link; name the export's file itself", out)
	}
	// The spans carry session ids and tool titles: the trace's permissions.
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if err := trace.WriteOTLP(f, "acp-bridge", recs); err != nil {
		f.Close()
		os.Remove(out)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "acp-bridge: wrote %s (spans of %d records)\n", out, len(recs))
	return nil
}

// traceInOut reads TRACE and -o FILE in either order (the flag package
// stops at the first argument).
func traceInOut(c *cli.Context, sub, ext string) (in, out string, err error) {
	out = c.String("output")
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
			return "", "", launch.Usagef("trace %s takes one TRACE file and -o FILE, not %q", sub, a)
		}
	}
	if in == "" {
		return "", "", launch.Usagef("trace %s needs the TRACE file: acp-bridge trace %s TRACE -o FILE", sub, sub)
	}
	if out == "" {
		out = in + ext
	}
	return in, out, nil
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
