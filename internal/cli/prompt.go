package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/urfave/cli/v2"
)

// The exit statuses of `acp-bridge prompt`, by the turn's stop reason
// (docs/prompt.md lists them). 1 and 2 are every command's: a runtime
// error (here also a turn that ended in an error answer) and a usage error.
const (
	exitRefusal         = 3
	exitMaxTokens       = 4
	exitMaxTurnRequests = 5
	exitCancelled       = 130 // as a shell reports a program stopped by Ctrl-C
)

// exitStatus is an error that asks Run for an exit status of its own; its
// message, if any, was already written to stderr.
type exitStatus struct{ code int }

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// stopStatus is the exit status of a turn that ended with reason.
func stopStatus(reason string) int {
	switch reason {
	case "end_turn":
		return 0
	case "refusal":
		return exitRefusal
	case "max_tokens":
		return exitMaxTokens
	case "max_turn_requests":
		return exitMaxTurnRequests
	case "cancelled":
		return exitCancelled
	}
	return 1
}

func promptCommand() *cli.Command {
	return &cli.Command{
		Name:      "prompt",
		Usage:     "send one prompt to the agent through the bridge and stream the turn to the terminal: acp-bridge as the editor, for trying an agent without one",
		UsageText: "acp-bridge prompt [--yes | --no] [--json] [--agent NAME | --url URL] TEXT [-- COMMAND [ARGS...]]\nacp-bridge prompt [flags] -- COMMAND [ARGS...] TEXT",
		ArgsUsage: "TEXT [-- COMMAND [ARGS...]]",
		Flags: append(promptRelayFlags(),
			&cli.BoolFlag{Name: "yes", Usage: "answer every permission question with the agent's allow-once option, without asking", EnvVars: envTwin("yes")},
			&cli.BoolFlag{Name: "no", Usage: "answer every permission question with the agent's reject option, without asking (the answer when there is no terminal to ask on)", EnvVars: envTwin("no")},
			&cli.BoolFlag{Name: "json", Usage: "print each session/update's params as one JSON line, then {\"stopReason\":…}, for scripts", EnvVars: envTwin("json")},
		),
		Action: promptAction,
	}
}

// promptRelayFlags are the relay's flags but --editor-protocol: prompt is
// the editor, and speaks ACP v1.
func promptRelayFlags() []cli.Flag {
	var flags []cli.Flag
	for _, s := range relayFlagSpecs {
		if s.name != launch.FlagEditorProtocol {
			flags = append(flags, s.build())
		}
	}
	return flags
}

// promptAction is `acp-bridge prompt`: the agent the same command line
// would serve, behind the same engine (launch.NewBridge), driven by a
// one-shot editor that runs initialize, session/new in the current
// directory and one session/prompt, and prints the turn on stdout. The exit
// status says how the turn ended (stopStatus).
func promptAction(c *cli.Context) error {
	text, argv, err := promptArgs(c)
	if err != nil {
		return err
	}
	if c.Bool("yes") && c.Bool("no") {
		return launch.Usagef("--yes and --no cannot be combined")
	}
	f := flagsFrom(c)
	f.Argv = argv
	r, err := resolveAgentFlags(c, f)
	if err != nil {
		return err
	}
	spec, s := r.spec, r.settings
	// The turn goes to stdout; logs stay quiet on stderr unless asked.
	quiet, err := quietSettings(c)
	if err != nil {
		return err
	}
	s.LogLevel, s.LogFile, s.LogFormat = quiet.LogLevel, quiet.LogFile, quiet.LogFormat
	shim, err := launch.ResolveShim(r.cfg, r.flags)
	if err != nil {
		return err
	}
	newTranslator, report := shim.ApplyShim(&spec, r.dialect, r.newTranslator)
	if spec.Command != nil {
		if _, err := exec.LookPath(spec.Command.Path); err != nil {
			return fmt.Errorf("agent command: %w", err)
		}
	}
	defer scrubStderr(spec.Secrets())()
	scrubber := launch.NewScrubber(spec.Secrets()...)
	logger, closeLog, err := launch.NewScrubbedLogger(s, scrubber)
	if err != nil {
		return err
	}
	defer closeLog.Close()
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("the current directory, the session's: %w", err)
	}

	b := launch.NewBridge(spec, r.dialect, newTranslator, s, logger, versionString())
	shim.Hook(b, report)
	closeTrace, err := startTrace(c, b, scrubber)
	if err != nil {
		return err
	}
	p := &prompter{
		out:      os.Stdout,
		diag:     os.Stderr,
		json:     c.Bool("json"),
		dim:      !c.Bool("json") && launch.IsTerminal(os.Stdout),
		cwd:      cwd,
		maxBytes: int64(s.MaxMessage),
		tools:    map[string]*toolSeen{},
	}
	switch {
	case c.Bool("yes"):
		p.answer = "yes"
	case c.Bool("no"):
		p.answer = "no"
	case launch.IsTerminal(os.Stdin):
		p.tty = bufio.NewReader(os.Stdin)
	}
	reason, turnErr := p.run(c.Context, b, text)
	closeTrace(logger)
	if rerr := report.Finish(os.Stderr); rerr != nil {
		logger.Error("could not write the compliance shim report", "error", rerr)
	}
	if turnErr != nil {
		msg := scrubber.Scrub(turnErr.Error())
		if p.json {
			p.final(map[string]any{"error": msg})
		}
		fmt.Fprintf(os.Stderr, "acp-bridge: %s\n", msg)
		return exitStatus{1}
	}
	if p.json {
		p.final(map[string]any{"stopReason": reason})
	} else if reason != "end_turn" {
		fmt.Fprintf(os.Stderr, "acp-bridge: the turn ended: %s\n", reason)
	}
	if code := stopStatus(reason); code != 0 {
		if code == 1 {
			fmt.Fprintf(os.Stderr, "acp-bridge: %q is not a stop reason ACP defines\n", reason)
		}
		return exitStatus{code}
	}
	return nil
}

// promptArgs splits prompt's arguments into the text and the agent's
// command. The text is the words before "--" (several words are joined by
// spaces); when none come before it, the last word after it is the text, so
// that `prompt -- COMMAND TEXT` works too. Flags given after the text are
// taken as flags: the flag package stops at the first word.
func promptArgs(c *cli.Context) (text string, argv []string, err error) {
	words := c.Args().Slice()
	var before []string
	if raw, _ := c.App.Metadata["args"].([]string); c.App.Metadata["dashdash"] == true {
		argv = raw[slices.Index(raw, "--")+1:]
		before = words[:max(len(words)-len(argv), 0)]
		if n := len(before); n > 0 && before[n-1] == "--" {
			before = before[:n-1]
		}
	} else {
		before = words
	}
	var textWords []string
	for i := 0; i < len(before); i++ {
		w := before[i]
		if !strings.HasPrefix(w, "-") || w == "-" {
			textWords = append(textWords, w)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
		fl := commandFlag(c.Command, name)
		if fl == nil {
			return "", nil, onUsageError(c, errors.New("flag provided but not defined: -"+name), true)
		}
		if !hasVal {
			if isBoolFlag(fl) {
				val = "true"
			} else if i+1 < len(before) {
				i++
				val = before[i]
			} else {
				return "", nil, launch.Usagef("flag needs an argument: --%s", name)
			}
		}
		if err := c.Set(name, val); err != nil {
			return "", nil, launch.Usagef("--%s: %v", name, err)
		}
	}
	text = strings.Join(textWords, " ")
	if text == "" && len(argv) > 1 {
		text, argv = argv[len(argv)-1], argv[:len(argv)-1]
	}
	if strings.TrimSpace(text) == "" {
		return "", nil, launch.Usagef("prompt needs the TEXT to send: acp-bridge prompt [flags] \"TEXT\" [-- COMMAND [ARGS...]]")
	}
	return text, argv, nil
}

// commandFlag is cmd's flag of that name, or nil.
func commandFlag(cmd *cli.Command, name string) cli.Flag {
	for _, f := range cmd.Flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func isBoolFlag(f cli.Flag) bool {
	switch f.(type) {
	case *boolFlag, *cli.BoolFlag:
		return true
	}
	return false
}
