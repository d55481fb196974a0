package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/toolkit/check"
	"github.com/urfave/cli/v2"
)

// compareCommand is `acp-bridge compare`: the same scripted session against
// two live agents, normalised and diffed.
func compareCommand() *cli.Command {
	return &cli.Command{
		Name:  "compare",
		Usage: "play the same session against two ACP agents and report how they differ",
		Description: "--a and --b are agent command lines (split like a shell would, no expansion) or ws:// URLs.\n" +
			"The session is initialize, session/new, then each --prompt in order; a prompt starting with\n" +
			"\"" + check.CancelPrefix + "\" is cancelled after its first update. Compared after normalisation (ids renumbered,\n" +
			"chunks merged): capabilities, update kinds and order, tool-call lifecycle, permission requests,\n" +
			"stop reasons, error codes. Latencies are reported, and compared only with --latency-tolerance.\n" +
			"When --a-protocol or --b-protocol is 2, each turn is compared by its outcome, which v1 and v2\n" +
			"both express (message and thought text, tool calls' final kind, title and status, permission\n" +
			"requests, the final plan, the stop reason), not by how it was streamed.",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "a", Usage: "agent A: a `COMMAND` line or a ws:// URL"},
			&cli.StringFlag{Name: "b", Usage: "agent B: a `COMMAND` line or a ws:// URL"},
			&cli.GenericFlag{Name: "prompt", Usage: "a prompt `TEXT` (repeatable, in order)", Value: &promptList{}},
			&cli.BoolFlag{Name: "json", Usage: "print the comparison as JSON"},
			&cli.BoolFlag{Name: "exit-code", Usage: "exit with status 1 when the agents differ or a session could not be played to the end"},
			&cli.BoolFlag{Name: "text", Usage: "compare the merged message text too, not only the shape"},
			&cli.DurationFlag{Name: "latency-tolerance", Usage: "report latencies that differ by more than `DURATION` as differences"},
			&cli.DurationFlag{Name: "timeout", Usage: "how long (`DURATION`) to wait for any one answer", Value: 30 * time.Second},
			&cli.DurationFlag{Name: "cancel-after", Usage: "cancel a \"" + check.CancelPrefix + "\" prompt after its first update, or after `DURATION`", Value: time.Second},
			&cli.StringFlag{Name: "cwd", Usage: "the sessions' working `DIR` (default: a temporary directory holding hello.txt)"},
			&cli.StringFlag{Name: "trace-dir", Usage: "keep each side's wire transcript as a trace in `DIR` (a.ndjson, b.ndjson); an acp-bridge under test writes its own beside it (a.bridge-PID.ndjson)"},
			&cli.IntFlag{Name: "a-protocol", Usage: "the ACP `VERSION` agent A speaks: 1 or 2", Value: 1},
			&cli.IntFlag{Name: "b-protocol", Usage: "the ACP `VERSION` agent B speaks: 1 or 2 (e.g. --b 'acp-bridge --editor-protocol 2 -- AGENT')", Value: 1},
		},
		Action: compareAction,
	}
}

func compareAction(c *cli.Context) error {
	prompts := *c.Generic("prompt").(*promptList)
	if c.String("a") == "" || c.String("b") == "" || len(prompts) == 0 {
		return launch.Usagef("compare needs two agents and a prompt: acp-bridge compare --a 'AGENT A' --b 'AGENT B' --prompt TEXT")
	}
	for _, f := range []string{"a-protocol", "b-protocol"} {
		if v := c.Int(f); v != 1 && v != 2 {
			return launch.Usagef("--%s %d: give 1 or 2", f, v)
		}
	}
	a, err := agentDialer("--a", c.String("a"))
	if err != nil {
		return err
	}
	b, err := agentDialer("--b", c.String("b"))
	if err != nil {
		return err
	}
	cmp, err := check.Compare(c.Context, check.CompareOptions{
		A: withTraceDir(a, c.String("trace-dir")), B: withTraceDir(b, c.String("trace-dir")),
		Prompts:          prompts,
		Timeout:          c.Duration("timeout"),
		CancelAfter:      c.Duration("cancel-after"),
		Cwd:              c.String("cwd"),
		Text:             c.Bool("text"),
		LatencyTolerance: c.Duration("latency-tolerance"),
		TraceDir:         c.String("trace-dir"),
		AProtocol:        c.Int("a-protocol"),
		BProtocol:        c.Int("b-protocol"),
	})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		err = cmp.WriteJSON(os.Stdout)
	} else {
		err = cmp.WriteText(os.Stdout)
	}
	if err != nil {
		return err
	}
	if err := c.Context.Err(); err != nil {
		return launch.ReportedError{Err: fmt.Errorf("compare interrupted (%w): the report covers what was played so far", context.Cause(c.Context))}
	}
	if c.Bool("exit-code") && len(cmp.Differences) > 0 {
		return launch.ReportedError{Err: fmt.Errorf("compare: %d difference(s)", len(cmp.Differences))}
	}
	if c.Bool("exit-code") && cmp.Incomplete() {
		return launch.ReportedError{Err: fmt.Errorf("compare: a session could not be played to the end, so the agents were not compared")}
	}
	return nil
}

// promptList collects repeated --prompt values as given: a prompt may
// contain commas, which a StringSliceFlag would split on.
type promptList []string

func (p *promptList) Set(v string) error { *p = append(*p, v); return nil }
func (p *promptList) String() string     { return strings.Join(*p, "\n") }

// agentDialer reads one --a/--b value: a ws:// URL or a command line.
func agentDialer(flag, v string) (check.Dialer, error) {
	if strings.HasPrefix(v, "ws://") || strings.HasPrefix(v, "wss://") {
		return check.URL{URL: v}, nil
	}
	args, err := splitCommand(v)
	if err != nil {
		return nil, launch.Usagef("%s %q: %v", flag, v, err)
	}
	if len(args) == 0 {
		return nil, launch.Usagef("%s is empty: give an agent command line or a ws:// URL", flag)
	}
	return check.Command{Args: args, Env: scratchSessions()}, nil
}

// splitCommand splits a command line into words the way a POSIX shell
// does for quoting (single quotes literal, double quotes with backslash
// escapes, backslash outside quotes), without any expansion.
func splitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
