package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/urfave/cli/v2"
)

// doctorStepTimeout bounds each step of doctor (the dial, initialize,
// session/new) unless --request-timeout says otherwise: long enough for a
// child that starts slowly, short enough that a silent agent is reported
// rather than waited for.
const doctorStepTimeout = 20 * time.Second

// doctorAction checks the agent the same command line would serve: it
// resolves the agent and its dialect as serving does, dials it with the same
// dialer, then puts the same engine (launch.NewBridge) in front of it and
// runs initialize and session/new from a small editor (acpclient). When the
// bridge answered both itself (dialects such as chat-lines speak only when
// prompted), or --prompt asks for it, it runs one prompt turn, so that at
// least one frame crosses to the agent and back. It prints what works and,
// for the first thing that does not, the cause and what to do, in plain
// words; the exit status is 1 when something fails.
func doctorAction(c *cli.Context) error {
	r, err := resolveAgent(c)
	if err != nil {
		return err
	}
	f, s, spec := r.flags, r.settings, r.spec
	// Doctor speaks to a person on stdout; logs stay quiet unless asked.
	quiet, err := quietSettings(c)
	if err != nil {
		return err
	}
	s.LogLevel, s.LogFile, s.LogFormat = quiet.LogLevel, quiet.LogFile, quiet.LogFormat
	if !f.Set[launch.FlagRequestTimeout] {
		s.RequestTimeout = doctorStepTimeout
	}
	logger, closeLog, err := launch.NewScrubbedLogger(s, launch.NewScrubber(spec.Secrets()...))
	if err != nil {
		return err
	}
	defer closeLog.Close()

	d := &doctor{
		out:      os.Stdout,
		json:     c.Bool("json"),
		scrub:    launch.NewScrubber(spec.Secrets()...).Scrub,
		progress: launch.NewProgress(os.Stderr),
		timeout:  s.RequestTimeout,
		prompt:   c.String("prompt"),
		heard:    &heard{},
	}
	if d.timeout <= 0 {
		d.timeout = doctorStepTimeout
	}
	d.report.Agent = d.scrub(spec.Desc)
	d.say("agent:   %s", spec.Desc)
	ok := d.run(c.Context, spec, r.dialect, r.newTranslator, s, logger)
	d.progress.Clear()
	switch {
	case !ok:
		d.report.Verdict = "failed"
	case d.turnChecked:
		d.report.Verdict = "all good"
		d.say("all good: an editor can use this agent through acp-bridge")
	default:
		d.report.Verdict = "no problem found"
		d.say("no problem found in initialize and session/new; a prompt turn was not run: --prompt TEXT runs one (it asks the agent's model), and only a turn that shows content proves an editor can use the agent")
	}
	d.report.OK = ok
	if d.json {
		enc := json.NewEncoder(d.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d.report); err != nil {
			return err
		}
	}
	if !ok {
		return launch.ReportedError{Err: errors.New("doctor found a problem")}
	}
	return nil
}

// doctorPrompt is the prompt of the turn doctor runs when the bridge
// answered initialize and session/new itself: short, and cheap to answer.
const doctorPrompt = "Reply with the single word: ok"

// doctor prints a report line by line, or, with --json, keeps it for one
// JSON object at the end.
type doctor struct {
	out      io.Writer
	json     bool
	scrub    func(string) string
	progress *launch.Progress
	timeout  time.Duration
	prompt   string // --prompt: run one whole turn with it
	heard    *heard
	report   doctorReport
	// turnChecked: a prompt turn showed content and no frame went
	// unmatched, the only run that earns "all good".
	turnChecked bool
}

// doctorReport is doctor's report for scripts (--json). Verdict is "all
// good" (a prompt turn showed content an editor would show, and no agent
// frame went unmatched), "no problem found" (initialize and session/new
// worked; no turn was run) or "failed".
type doctorReport struct {
	Agent   string       `json:"agent"`
	OK      bool         `json:"ok"`
	Verdict string       `json:"verdict"`
	Steps   []doctorStep `json:"steps"`
}

// doctorStep is one line of the report: status is ok, note or failed;
// fix says what to do about a failed step.
type doctorStep struct {
	Status string `json:"status"`
	Text   string `json:"text"`
	Fix    string `json:"fix,omitempty"`
}

func (d *doctor) say(format string, args ...any) {
	if d.json {
		return
	}
	d.progress.Clear()
	fmt.Fprintln(d.out, d.scrub(fmt.Sprintf(format, args...)))
}

func (d *doctor) step(status, format string, args ...any) {
	text := d.scrub(fmt.Sprintf(format, args...))
	d.report.Steps = append(d.report.Steps, doctorStep{Status: status, Text: text})
	label := map[string]string{"ok": "ok", "note": "note", "failed": "FAILED"}[status]
	d.say("%-8s %s", label, text)
}

func (d *doctor) pass(format string, args ...any) { d.step("ok", format, args...) }
func (d *doctor) note(format string, args ...any) { d.step("note", format, args...) }

// fail reports a failed step: what happened, and what to do about it.
func (d *doctor) fail(what, fix string) bool {
	d.step("failed", "%s", what)
	d.report.Steps[len(d.report.Steps)-1].Fix = d.scrub(fix)
	d.say("to fix:  %s", fix)
	return false
}

// waiting shows, on a terminal, what doctor waits for and for how long,
// with what the agent has sent so far, until the returned func is called.
func (d *doctor) waiting(what string) (stop func()) {
	if d.progress == nil {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	show := func() {
		n, noise, _ := d.heard.counts()
		d.progress.Step("doctor: waiting for %s, %ds; from the agent: %d frame(s), %d other line(s)", what, int(time.Since(start).Seconds()), n, noise)
	}
	show()
	go func() {
		defer close(finished)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				show()
			}
		}
	}()
	return func() { close(done); <-finished }
}
