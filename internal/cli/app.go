// Package cli is acp-bridge's command layer: the command line, the flags
// and their ACP_BRIDGE_* environment twins, and one file per command
// (serve.go, doctor.go, check.go, config.go, trace.go, replay.go, …), a
// large one split into files named after it (doctor_run.go, …). The
// main package only calls Run; the bridge itself lives in package bridge,
// the dialects in translate and its subpackages.
//
// Serving (serve.go) is the composition root: it reads the flags and the
// HCL configuration, builds the logger, picks the agent and its dialect,
// and hands a bridge.Bridge the stdio. Stdout carries nothing but ACP while
// serving: usage errors and logs go to stderr, and stray writes to
// os.Stdout are diverted there too (see reserveStdout in stdout_unix.go).
// Help and version, which are never serving, print to stdout like any other
// command's output.
//
// The process-level pieces live here too, because serving sets them up:
// the stderr filter that scrubs crash output of secrets, which Run becomes
// when the binary re-executes itself with stderrFilterCommand
// (crash_unix.go), the stdout guard built on dup2 (dup2.go, dup3.go) and the
// profiles that ACP_BRIDGE_CPUPROFILE and ACP_BRIDGE_ALLOCPROFILE ask for (profile.go).
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/urfave/cli/v2"
)

// Run executes the command line args (args[0] is the program name) and
// returns the exit status: 0, 1 for a runtime or configuration error, 2 for
// a usage error; a command that says more in its status returns an
// exitStatus (prompt: the turn's stop reason).
func Run(args []string) int {
	if len(args) == 2 && args[1] == stderrFilterCommand {
		return stderrFilterMain() // see crash_unix.go
	}
	defer startProfiles()()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal starts the shutdown, restore the default
		// handling so that a second one kills a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	app := newApp()
	// Whether the agent command was given after "--": urfave/cli hands
	// bare words and words after "--" over alike.
	app.Metadata = map[string]any{"dashdash": slices.Contains(args, "--"), "args": args}
	err := app.RunContext(ctx, args)
	removeScratch()
	var ue launch.UsageError
	var re launch.ReportedError
	var xs exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &xs):
		return xs.code
	case errors.As(err, &ue):
		// Point to the help of the command that was run.
		help := "acp-bridge --help"
		if name, _ := app.Metadata["command"].(string); name != "" {
			help = "acp-bridge " + name + " --help"
		}
		fmt.Fprintf(os.Stderr, "acp-bridge: %v\nRun '%s' for usage.\n", ue.Err, help)
		return 2
	case errors.As(err, &re):
		return 1
	default:
		fmt.Fprintf(os.Stderr, "acp-bridge: %v\n", err)
		return 1
	}
}

// onUsageError turns urfave/cli's usage errors into exit status 2, adding
// the nearest flag to a mistyped one ("--ulr": did you mean "--url"?).
func onUsageError(c *cli.Context, err error, _ bool) error {
	const undefined = "flag provided but not defined: -"
	if c != nil && c.Command != nil && c.App.Metadata != nil {
		if name := commandName(c); name != c.App.Name {
			c.App.Metadata["command"] = name
		}
	}
	if msg := err.Error(); strings.HasPrefix(msg, undefined) {
		// The flag package names the flag with one dash whatever the user
		// typed; say it as people write it.
		name := strings.TrimLeft(strings.TrimPrefix(msg, undefined), "-")
		err = fmt.Errorf("unknown flag --%s", name)
		if c != nil && c.Command != nil {
			var names []string
			for _, f := range c.Command.Flags {
				names = append(names, f.Names()...)
			}
			if s := launch.Nearest(name, names); s != "" {
				return launch.UsageError{Err: fmt.Errorf("%w. Did you mean --%s?", err, s)}
			}
		}
	}
	return launch.UsageError{Err: err}
}

func envTwin(name string) []string {
	return []string{"ACP_BRIDGE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

func newApp() *cli.App {
	app := &cli.App{
		Name:      "acp-bridge",
		Usage:     "serve an ACP editor on stdio from an agent that speaks another dialect",
		UsageText: "acp-bridge [flags]\nacp-bridge [flags] --url ws://HOST:PORT/PATH\nacp-bridge [flags] -- COMMAND [ARGS...]\nacp-bridge COMMAND [flags]",
		Version:   versionString(),
		// Help and --version are asked for, never printed while serving, so
		// they go to stdout (`acp-bridge --help | grep url`). Usage errors
		// go to stderr without a help dump (onUsageError), so a mistyped
		// flag in an editor's agent settings writes nothing on the ACP
		// stream (ARCHITECTURE.md, "stdout is sacred").
		Writer:    os.Stdout,
		ErrWriter: os.Stderr,
		// Exit codes are decided by run, not by urfave/cli calling os.Exit.
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError:    onUsageError,
		HideHelpCommand: true,
		Flags:           serveFlags(),
		Action:          serveAction,
		Commands: []*cli.Command{
			versionCommand(),
			{
				Name:  "config",
				Usage: "work with the configuration file",
				Subcommands: []*cli.Command{{
					Name:  "validate",
					Usage: "check the configuration file and the --profile file; print diagnostics to stderr",
					Flags: append(commonFlagsUsing(launch.FlagConfig, flagProfile), &cli.BoolFlag{
						Name:  "json",
						Usage: "print the result as a JSON object (ok, the file, the agents, the diagnostics), for scripts",
					}),
					Action: validateAction,
				}, {
					Name:  "show",
					Usage: "print the resolved configuration (secrets masked), the files read and what flags or environment overrode",
					Flags: append(serveFlags(), &cli.BoolFlag{
						Name:  "json",
						Usage: "print the resolved configuration as a JSON object, for scripts",
					}),
					Action: configShowAction,
				}, {
					Name:   "init",
					Usage:  "write a commented starter configuration file at --config's path; never overwrites",
					Flags:  commonFlagsUsing(launch.FlagConfig),
					Action: configInitAction,
				}},
			},
			{
				Name:   "dialects",
				Usage:  "list the agent dialects this binary speaks; 'dialects show NAME' prints a profile's HCL, 'dialects doc' the profile language, 'dialects new NAME' starts a profile",
				Action: dialectsAction,
				Flags: append(commonFlagsUsing(launch.FlagConfig, flagProfile), &cli.BoolFlag{
					Name:  "json",
					Usage: "print the list as a JSON array, for scripts",
				}),
				Subcommands: []*cli.Command{{
					Name:      "show",
					Usage:     "print the HCL of a shipped or configured rule profile",
					ArgsUsage: "NAME",
					Flags:     commonFlagsUsing(launch.FlagConfig, flagProfile),
					Action:    dialectsShowAction,
				}, dialectsDocCommand(), dialectsNewCommand()},
			},
			{
				Name:  "demo",
				Usage: "play a scripted session against a built-in legacy agent",
				Flags: append(commonFlags(), &cli.BoolFlag{
					Name:  "raw",
					Usage: "print every ACP line and every agent frame instead of the readable view",
				}),
				Action: demoAction,
			},
			{
				Name:      "doctor",
				Usage:     "dial the agent you would serve, run initialize, session/new and, when the agent has not spoken yet or --prompt asks, one prompt turn; say what works and what to fix",
				UsageText: "acp-bridge doctor [--prompt TEXT] [--json] [--agent NAME | --url URL | -- COMMAND [ARGS...]]",
				ArgsUsage: "[-- COMMAND [ARGS...]]",
				Flags: append(serveFlags(),
					&cli.StringFlag{Name: "prompt", Usage: "run one whole prompt turn with `TEXT` (permissions it asks are refused) and report its end, the time to the first update and the agent frames the dialect could not place; only such a turn, showing content with every frame matched, earns \"all good\""},
					&cli.BoolFlag{Name: "json", Usage: "print the report as one JSON object, for scripts"},
				),
				Action: doctorAction,
			},
			promptCommand(),
			remoteServeCommand(),
			checkCommand(),
			compareCommand(),
			traceCommand(),
			replayCommand(),
			completionCommand(),
			manCommand(),
		},
	}
	harden(app)
	return app
}
