package cli

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/toolkit/check"
	"github.com/urfave/cli/v2"
)

// checkCommand is `acp-bridge check`: drive an ACP agent as an editor does
// and report, scenario by scenario, how far it is from ACP v1.
func checkCommand() *cli.Command {
	var names, v2names []string
	for _, s := range check.Scenarios() {
		names = append(names, s.ID)
	}
	for _, s := range check.V2Scenarios() {
		v2names = append(v2names, s.ID)
	}
	return &cli.Command{
		Name:      "check",
		Usage:     "check an ACP agent against the protocol, one scenario per line (PASS, FAIL, SKIP, NOT RUN)",
		ArgsUsage: "[-- COMMAND [ARGS...]]",
		Description: "Runs each scenario on a fresh agent process (or WebSocket connection) and prints one line per\n" +
			"scenario with its tier (mandatory, capability, advisory) and reason; a failure shows the offending\n" +
			"lines of the wire transcript. Exit status 1 when a scenario of a --fail-on tier (mandatory and\n" +
			"capability by default) failed or could not run and the --baseline does not expect it, or when the\n" +
			"baseline lists a scenario that passed. SIGINT or SIGTERM stops the run and prints what was found.\n" +
			"Scenarios: " + strings.Join(names, ", ") + "\n" +
			"With --protocol 2: " + strings.Join(v2names, ", "),
		OnUsageError: onUsageError,
		Flags: append(agentPromptFlags(),
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
			&cli.StringFlag{Name: "junit", Usage: "also write the report as JUnit XML to `FILE`"},
			&cli.StringSliceFlag{Name: "only", Usage: "run only these scenario `IDS` (comma-separated)"},
			&cli.DurationFlag{Name: "quiet", Usage: "how long (`DURATION`) of silence means the agent has nothing more to say", Value: 300 * time.Millisecond},
			&cli.DurationFlag{Name: "cancel-after", Usage: "cancel the long prompt after its first update, or after `DURATION`", Value: time.Second},
			&cli.StringFlag{Name: "long-prompt", Usage: "a prompt (`TEXT`) that keeps the agent busy long enough to be cancelled", Value: check.DefaultLongPrompt},
			&cli.StringFlag{Name: "file-prompt", Usage: "a prompt (`TEXT`) that makes the agent read hello.txt in the session's cwd", Value: check.DefaultFilePrompt},
			&cli.StringFlag{Name: "permission-prompt", Usage: "a prompt (`TEXT`) that makes the agent ask for permission", Value: check.DefaultPermissionPrompt},
			&cli.StringFlag{Name: "cwd", Usage: "the working `DIR` every scenario's session shares (default: a temporary directory, one subdirectory holding hello.txt per scenario)"},
			&cli.StringFlag{Name: "trace-dir", Usage: "keep every scenario's wire transcript as a trace in `DIR` (SCENARIO.ndjson, for 'acp-bridge trace view' and 'replay'); an acp-bridge under test writes its own trace beside it (SCENARIO.bridge-PID.ndjson)"},
			&cli.BoolFlag{Name: "transcripts", Usage: "print every scenario's whole transcript, passing ones too"},
			&cli.StringFlag{Name: "fail-on", Usage: "the `TIERS` whose failures fail the run (comma-separated: mandatory, capability, advisory, informational)", Value: "mandatory,capability"},
			&cli.StringFlag{Name: "baseline", Usage: "an expected-failures `FILE`: one scenario id per line, # comments; a listed scenario that passes fails the run (stale baseline)"},
			&cli.IntFlag{Name: "protocol", Usage: "the ACP `VERSION` to check the agent against: 1, or 2 (v2 scenarios and schema; fs, terminal and modes are not applicable)", Value: 1},
		),
		Action: checkAction,
	}
}

// agentPromptFlags are the flags check and compare share.
func agentPromptFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "url", Usage: "check the ACP agent at this ws:// or wss:// `URL` instead of a command"},
		&cli.DurationFlag{Name: "timeout", Usage: "how long (`DURATION`) to wait for any one answer (real agents may take seconds)", Value: 30 * time.Second},
	}
}

func checkAction(c *cli.Context) error {
	d, err := dialerFrom(c.String("url"), c.Args().Slice())
	if err != nil {
		return err
	}
	d = withTraceDir(d, c.String("trace-dir"))
	var only []string
	for _, s := range c.StringSlice("only") {
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f != "" {
				only = append(only, f)
			}
		}
	}
	failOn, err := check.ParseTiers(c.String("fail-on"))
	if err != nil {
		return launch.Usagef("--fail-on: %v", err)
	}
	var baseline []string
	if f := c.String("baseline"); f != "" {
		in, err := os.Open(f)
		if err != nil {
			return launch.Usagef("--baseline: %v", err)
		}
		baseline, err = check.ParseBaseline(in)
		in.Close()
		if err != nil {
			return launch.Usagef("--baseline %s: %v", f, err)
		}
	}
	if v := c.Int("protocol"); v != 1 && v != 2 {
		return launch.Usagef("--protocol %d: give 1 or 2", v)
	}
	rep, err := check.Run(c.Context, check.Options{
		Dialer:           d,
		Only:             only,
		Timeout:          c.Duration("timeout"),
		Quiet:            c.Duration("quiet"),
		CancelAfter:      c.Duration("cancel-after"),
		Prompt:           check.DefaultPrompt,
		LongPrompt:       c.String("long-prompt"),
		FilePrompt:       c.String("file-prompt"),
		PermissionPrompt: c.String("permission-prompt"),
		Cwd:              c.String("cwd"),
		TraceDir:         c.String("trace-dir"),
		Transcripts:      c.Bool("transcripts"),
		Protocol:         c.Int("protocol"),
	})
	if err != nil && rep == nil {
		return launch.UsageError{Err: err}
	}
	// Interrupted (SIGINT, SIGTERM), the report still says what was found.
	interrupted := err
	rep.FailOn = failOn
	rep.ApplyBaseline(baseline)
	if f := c.String("junit"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			return err
		}
		if err := rep.WriteJUnit(out); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		err = rep.WriteJSON(os.Stdout)
	} else {
		err = rep.WriteText(os.Stdout)
	}
	if err != nil {
		return err
	}
	if interrupted != nil {
		return launch.ReportedError{Err: interrupted}
	}
	if rep.Failed() {
		return launch.ReportedError{Err: fmt.Errorf("check: the run failed (see the report's last line)")}
	}
	return nil
}

// dialerFrom turns --url or the words after -- into a check.Dialer.
func dialerFrom(url string, args []string) (check.Dialer, error) {
	switch {
	case url != "" && len(args) > 0:
		return nil, launch.Usagef("give either --url or an agent command after --, not both")
	case url != "":
		if err := config.CheckAgentURL(url); err != nil {
			return nil, launch.Usagef("--url: %v", err)
		}
		return check.URL{URL: url}, nil
	case len(args) > 0:
		return check.Command{Args: args, Env: scratchSessions()}, nil
	}
	return nil, launch.Usagef("no agent: give an agent command after -- (acp-bridge check -- my-agent --acp) or --url ws://…")
}

// withTraceDir has an agent command d starts name its acp-bridge trace
// after the scenario, in dir.
func withTraceDir(d check.Dialer, dir string) check.Dialer {
	if cmd, ok := d.(check.Command); ok && dir != "" {
		cmd.TraceDir = dir
		return cmd
	}
	return d
}

// scratchSessions is the environment check and compare give the agents
// they start: an acp-bridge among them records its sessions in a
// directory of the run's own, never in the user's history (the test
// sessions' prompts and ids are nobody's conversations). The directory is
// removed when the process exits (see removeScratch).
func scratchSessions() []string {
	scratch.once.Do(func() {
		scratch.dir, scratch.err = os.MkdirTemp("", "acp-bridge-check-sessions-")
	})
	if scratch.err != nil {
		// With no scratch directory the bridge under test records nothing.
		return []string{"ACP_BRIDGE_NO_SESSIONS=1"}
	}
	return []string{"ACP_BRIDGE_STATE_DIR=" + scratch.dir}
}

var scratch struct {
	once sync.Once
	dir  string
	err  error
}

// removeScratch removes the scratch session directory, if one was made.
func removeScratch() {
	if scratch.dir != "" {
		os.RemoveAll(scratch.dir)
	}
}
