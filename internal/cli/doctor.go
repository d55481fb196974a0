package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/acpclient"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/rules"
	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
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

// heard is what crossed the agent hop, for the diagnosis: the frames the
// agent sent (the first few kept), the lines on its stdout that were not
// JSON, the notes of the dialect (unmatched frames, the connect frame it
// waits for), and how many frames went to the agent.
type heard struct {
	mu sync.Mutex
	d  heardSoFar
}

// heardSoFar is a copy of what heard holds.
type heardSoFar struct {
	sent      int
	received  int
	frames    []string // the first maxKept, as snippets
	jsonRPC   string   // the first frame in a JSON-RPC 2.0 envelope
	noiseN    int
	noise     []string
	unmatchN  int
	unmatched []string // the first maxKept notes, without their near miss
	nearMiss  string   // the first near miss an unmatched note named
	expect    string   // the connect-expect note's detail
	rejected  string   // the connect-rejected note's detail
}

const maxKept = 3

func (h *heard) tap(ev bridge.TapEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case ev.Hop == bridge.AgentHop && ev.Inbound:
		if h.d.received++; len(h.d.frames) < maxKept {
			h.d.frames = append(h.d.frames, snippet(ev.Message, 160))
		}
		if h.d.jsonRPC == "" && gjson.GetBytes(ev.Message, "jsonrpc").Str == "2.0" {
			h.d.jsonRPC = snippet(ev.Message, 160)
		}
	case ev.Hop == bridge.AgentHop:
		h.d.sent++
	case ev.Hop == bridge.BridgeHop && ev.Note == "connect-expect":
		h.d.expect = ev.Detail
	case ev.Hop == bridge.BridgeHop && ev.Note == "connect-rejected":
		h.d.rejected = ev.Detail
	case ev.Hop == bridge.BridgeHop && ev.Note == "unmatched-frames":
		note, near, _ := strings.Cut(ev.Detail, rules.NearMissMark)
		if h.d.nearMiss == "" {
			h.d.nearMiss = near
		}
		if h.d.unmatchN++; len(h.d.unmatched) < maxKept {
			h.d.unmatched = append(h.d.unmatched, snippet([]byte(note), 200))
		}
	}
}

func (h *heard) noiseLine(line []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.d.noiseN++; len(h.d.noise) < maxKept {
		h.d.noise = append(h.d.noise, snippet(line, 120))
	}
}

func (h *heard) counts() (frames, noise, unmatched int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.d.received, h.d.noiseN, h.d.unmatchN
}

func (h *heard) snapshot() heardSoFar {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.d
	c.frames, c.noise, c.unmatched = slices.Clone(c.frames), slices.Clone(c.noise), slices.Clone(c.unmatched)
	return c
}

func (d *doctor) run(ctx context.Context, spec launch.Agent, dialect translate.Dialect, newTranslator func() translate.Translator, s launch.Settings, logger hclog.Logger) bool {
	dial := spec.Dialer(logger, s.MaxMessage)

	// Step 1: the transport alone, so that a refused connection, a
	// certificate or a token is told apart from a protocol problem.
	if spec.Command != nil {
		d.progress.Step("doctor: looking for %s", spec.Command.Path)
		p, err := exec.LookPath(spec.Command.Path)
		if err != nil {
			return d.fail(fmt.Sprintf("the agent's executable %q was not found: %v", spec.Command.Path, errors.Unwrap(err)),
				"install it, or give its full path (command = [\"/path/to/agent\", …] in the agent block, or after --); "+
					"an editor may start acp-bridge with a shorter PATH than your shell's")
		}
		d.pass("executable %s", p)
		// Lines the agent prints that are not JSON are evidence too: a
		// child that logs to stdout, or speaks plain text.
		cmd := *spec.Command
		prev := cmd.OnNoise
		cmd.OnNoise = func(line []byte) {
			d.heard.noiseLine(line)
			if prev != nil {
				prev(line)
			}
		}
		spec.Command = &cmd
	} else {
		step := "WebSocket handshake with"
		if isHTTP(spec) {
			step = "Streamable HTTP endpoint"
		}
		stop := d.waiting("the " + step + " " + spec.WebSocket.URL)
		dctx, cancel := context.WithTimeout(ctx, d.timeout)
		link, err := dial(dctx, bridge.Spawn{})
		cancel()
		stop()
		if err != nil {
			return d.fail(d.scrub(err.Error()), fixDial(err, spec))
		}
		link.Close()
		// Streamable HTTP sends nothing before initialize: its dial only
		// checks the URL, so the endpoint is vouched for by initialize.
		if !isHTTP(spec) {
			d.pass("%s %s", step, spec.WebSocket.URL)
		}
	}

	// Step 2: the engine in front of the agent, as serving composes it.
	b := launch.NewBridge(spec, dialect, newTranslator, s, logger, versionString())
	b.Tap = d.heard.tap
	turn := &turnWatch{}
	conn, end := serveInProcess(ctx, b, acpclient.Handler{
		Request: func(method string, params json.RawMessage) (any, *acpclient.Error) {
			if method == "session/request_permission" {
				turn.asked()
				return refusePermission(params), nil
			}
			return nil, &acpclient.Error{Code: translate.CodeMethodNotFound, Message: "doctor's editor does not serve " + method}
		},
		Notification: func(method string, params json.RawMessage) {
			if method == "session/update" {
				turn.update(params)
			}
		},
	})
	defer end()

	call := func(method string, params any) (json.RawMessage, error) {
		stop := d.waiting(method)
		defer stop()
		cctx, cancel := context.WithTimeout(ctx, d.timeout+5*time.Second)
		defer cancel()
		return conn.Call(cctx, method, params)
	}
	res, err := call("initialize", map[string]any{
		"protocolVersion":    1,
		"clientCapabilities": map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false},
		"clientInfo":         map[string]string{"name": "acp-bridge-doctor", "version": versionString()},
	})
	if err != nil {
		return d.failed(ctx, "initialize", err, spec, dial)
	}
	if isHTTP(spec) {
		d.pass("Streamable HTTP endpoint %s", spec.WebSocket.URL)
	}
	info := gjson.GetBytes(res, "agentInfo")
	name := info.Get("name").Str
	if name == "" {
		name = "(no agentInfo)"
	}
	bridgeAnswered := d.heard.snapshot().received == 0
	how := ""
	if bridgeAnswered {
		how = " (answered by acp-bridge: dialect " + spec.Dialect + " has no initialize of its own)"
	}
	version := gjson.GetBytes(res, "protocolVersion").Raw
	if p := gjson.GetBytes(res, "_meta.acp-bridge.agentProtocol"); p.Exists() && p.Raw != version {
		version = p.Raw + " (editors are spoken to in " + version + ")"
	}
	d.pass("initialize: %s %s, protocol version %s%s", name, info.Get("version").Str, version, how)
	if auth := gjson.GetBytes(res, "authMethods"); len(auth.Array()) > 0 {
		var ids []string
		for _, m := range auth.Array() {
			ids = append(ids, m.Get("id").Str)
		}
		d.note("the agent offers authentication: %s", strings.Join(ids, ", "))
	}

	cwd, err := os.Getwd()
	if err != nil {
		cwd = os.TempDir()
	}
	res, err = call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if err != nil {
		var rpcErr *acpclient.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == translate.CodeAuthRequired {
			return d.fail("session/new: the agent requires authentication: "+d.scrub(rpcErr.Message),
				"log in as the agent's documentation says (for Gemini CLI, run gemini once or set GEMINI_API_KEY in the agent's env), then run doctor again")
		}
		return d.failed(ctx, "session/new", err, spec, dial)
	}
	sid := gjson.GetBytes(res, "sessionId").Str
	d.pass("session/new: session %s in %s", sid, cwd)

	// Step 3: at least one frame from the agent, for every dialect.
	prompt := d.prompt
	if prompt == "" {
		if h := d.heard.snapshot(); h.received > 0 {
			if h.unmatchN > 0 {
				return d.unmatched(ctx, "agent frames", "initialize and session/new worked", h, spec, dial)
			}
			return true
		}
		prompt = doctorPrompt
		d.note("the agent has not spoken yet (dialect %s answers initialize and session/new in the bridge); a short prompt checks that it answers: %q", spec.Dialect, prompt)
	}
	return d.promptTurn(ctx, conn, turn, sid, prompt, spec, dial)
}

// refusePermission answers a permission request as a careful user does:
// with the option that rejects once (else rejects always), so that the
// agent runs nothing for doctor and its turn goes on to its end; without a
// rejecting option, cancelled.
func refusePermission(params json.RawMessage) map[string]any {
	var always string
	for _, o := range gjson.GetBytes(params, "options").Array() {
		switch o.Get("kind").Str {
		case "reject_once":
			return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": o.Get("optionId").Str}}
		case "reject_always":
			if always == "" {
				always = o.Get("optionId").Str
			}
		}
	}
	if always != "" {
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": always}}
	}
	return map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}
}

// turnWatch counts the session/update notifications of doctor's turn, when
// the first came, and those with content an editor shows (a message, a
// thought, a tool call, a plan), by kind.
type turnWatch struct {
	mu      sync.Mutex
	updates int
	first   time.Time
	shown   int
	kinds   []string // every kind seen, in order of first sight
	asks    int      // permission requests, each refused
}

func (t *turnWatch) asked() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.asks++
}

func (t *turnWatch) update(params json.RawMessage) {
	u := gjson.GetBytes(params, "update")
	kind := u.Get("sessionUpdate").Str
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.updates++; t.updates == 1 {
		t.first = time.Now()
	}
	if !slices.Contains(t.kinds, kind) {
		t.kinds = append(t.kinds, kind)
	}
	if shows(kind, u) {
		t.shown++
	}
}

// shows reports whether an update of kind is content an editor shows the
// user as the agent's answer: a message or thought chunk that is not
// empty, a tool call, a plan. Commands, modes, usage, session information
// and the echo of the user's own prompt are not.
func shows(kind string, u gjson.Result) bool {
	switch kind {
	case "agent_message_chunk", "agent_thought_chunk":
		c := u.Get("content")
		return c.Get("type").Str != "text" || c.Get("text").Str != ""
	case "tool_call", "tool_call_update", "plan":
		return true
	}
	return false
}

func (t *turnWatch) get() (updates int, first time.Time, shown, asks int, kinds []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.updates, t.first, t.shown, t.asks, slices.Clone(t.kinds)
}

// promptTurn runs one whole turn and reports its end, the time to the
// first update, and the agent frames the dialect could not place. The turn
// passes only when it ended, showed content an editor would show, and no
// agent frame went unmatched: then doctor may say "all good".
func (d *doctor) promptTurn(ctx context.Context, conn *acpclient.Conn, turn *turnWatch, sid, prompt string, spec launch.Agent, dial dialFunc) bool {
	start := time.Now()
	stop := d.waiting("the end of the prompt turn")
	pctx, cancel := context.WithTimeout(ctx, d.timeout)
	res, err := conn.Call(pctx, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": prompt}}})
	cancel()
	stop()
	took := time.Since(start).Round(time.Millisecond)
	updates, first, shown, asks, kinds := turn.get()
	h := d.heard.snapshot()
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return d.failed(ctx, "session/prompt", err, spec, dial)
		}
		err = fmt.Errorf("no end of turn within %v (%d update(s) so far)", d.timeout, updates)
		if updates == 0 || h.unmatchN > 0 {
			return d.failed(ctx, "session/prompt", err, spec, dial)
		}
		// The agent streamed, in words the dialect understood: the
		// dialect is right, the end never came (or not yet).
		why := "the dialect did not recognise the end of its turn: check the match of the rule that ends it (--log-level debug shows every frame)"
		if acpFamily(spec.Dialect) {
			why = "it never answered session/prompt, which an ACP agent must do with a stopReason: that is for the agent to fix"
		}
		return d.fail(fmt.Sprintf("session/prompt: %v; %s", err, d.heardText(h)),
			fmt.Sprintf("the agent streamed but did not end the turn: if it is still working, give it longer (--%s); if not, %s", launch.FlagRequestTimeout, why))
	}
	stopReason := gjson.GetBytes(res, "stopReason").Str
	if h.received == 0 {
		return d.wrongDialect(ctx, "session/prompt", fmt.Errorf("the turn ended (%s) after %v without a word from the agent", stopReason, took), spec, dial)
	}
	ended := fmt.Sprintf("the turn ended (%s) after %v with %d update(s)", stopReason, took, updates)
	if h.unmatchN > 0 {
		return d.unmatched(ctx, "session/prompt", ended, h, spec, dial)
	}
	if shown == 0 {
		what := ended
		if len(kinds) > 0 {
			what += " (" + strings.Join(kinds, ", ") + ")"
		}
		what += ", none of them content an editor shows (a message, a thought, a tool call, a plan); " + d.heardText(h)
		if fix, ok := d.fixJSONRPC(ctx, h, spec, dial); ok {
			return d.fail("session/prompt: "+what, fix)
		}
		return d.fail("session/prompt: "+what,
			fmt.Sprintf("no rule of dialect %s turned the agent's answer into a message: run doctor with --log-level debug to see which rule each frame matched, and give the one that carries the answer a message (or final_message); or use a prompt this agent answers in words", spec.Dialect))
	}
	d.pass("session/prompt: end of turn (%s) after %v; %d update(s), first update after %v; %d with content an editor shows", stopReason, took, updates, first.Sub(start).Round(time.Millisecond), shown)
	if asks > 0 {
		d.note("the agent asked permission %d time(s); doctor refused, so that it ran nothing", asks)
	}
	d.turnChecked = true
	return true
}

// failed reports a step whose request failed, by the likeliest cause the
// evidence shows: the agent refused the connection (a profile's reject),
// the link could not be opened or was refused (HTTP status, a dead
// process), frames no rule matched, or another dialect.
func (d *doctor) failed(ctx context.Context, step string, err error, spec launch.Agent, dial dialFunc) bool {
	h := d.heard.snapshot()
	switch cause := linkCause(err); {
	case h.rejected != "":
		return d.fail(fmt.Sprintf("%s: %s; %s", step, d.scrub(err.Error()), strings.TrimPrefix(h.rejected, "profile "+spec.Dialect+": ")),
			"the agent refused the credentials: check the token the profile sends"+readsEnv(h.rejected)+" and that it is valid for this agent (if the refusal is about something else, its words above say what)")
	case cause != nil && h.received == 0:
		return d.fail(step+": "+d.scrub(err.Error()), fixLink(cause, spec))
	case h.expect != "" && step == "initialize" && h.nearMiss == "":
		// The greeting never came, and nothing the agent sent looks like
		// a typo of it: wrongDialect says which frame it waited for.
	case h.unmatchN > 0:
		return d.unmatched(ctx, step, d.scrub(err.Error()), h, spec, dial)
	}
	return d.wrongDialect(ctx, step, err, spec, dial)
}

// readsEnv returns " (it reads NAME, … from the environment)" when a
// connect-rejected note names the variables the profile reads, else "".
func readsEnv(note string) string {
	const mark = "the profile reads the environment variable(s) "
	if _, names, ok := strings.Cut(note, mark); ok {
		return " (it reads " + names + " from the environment)"
	}
	return ""
}

// unmatched reports a step after which agent frames matched no rule of the
// dialect: they are the evidence, shown in the report, and the fix is the
// profile's match a typo broke (the rule that likely meant the frame), the
// ACP dialect when the frames are JSON-RPC 2.0, or a rule for them.
func (d *doctor) unmatched(ctx context.Context, step, what string, h heardSoFar, spec launch.Agent, dial dialFunc) bool {
	if h.nearMiss != "" {
		what = strings.ReplaceAll(what, rules.NearMissMark+h.nearMiss, "") // the fix quotes it
	}
	text := fmt.Sprintf("%s: %s; %d agent frame(s) matched no rule of dialect %s and were dropped: %s", step, what, h.unmatchN, spec.Dialect, strings.Join(h.unmatched, " | "))
	if h.nearMiss != "" {
		return d.fail(text, "edit the profile's match: "+h.nearMiss)
	}
	if fix, ok := d.fixJSONRPC(ctx, h, spec, dial); ok {
		return d.fail(text, fix)
	}
	fix := fmt.Sprintf("add a rule for these frames to dialect %s (an event whose match fits them; one without output if they mean nothing to an editor), or, if the agent speaks another protocol, pick its dialect (--%s NAME; 'acp-bridge dialects' lists them)", spec.Dialect, launch.FlagDialect)
	if h.jsonRPC != "" && !acpFamily(spec.Dialect) {
		fix += fmt.Sprintf("; its frames are JSON-RPC 2.0, as ACP's are: if it speaks ACP, use --%s acp", launch.FlagDialect)
	}
	return d.fail(text, fix)
}

// fixJSONRPC is the fix for an agent whose frames are JSON-RPC 2.0 under a
// dialect of another protocol, when the agent confirms it speaks ACP by
// answering an ACP initialize on a link of its own: the ACP dialect of the
// version it answers with. ok is false when it does not confirm (a rule
// profile over JSON-RPC, say).
func (d *doctor) fixJSONRPC(ctx context.Context, h heardSoFar, spec launch.Agent, dial dialFunc) (string, bool) {
	if h.jsonRPC == "" || acpFamily(spec.Dialect) {
		return "", false
	}
	v, ok := d.probeACP(ctx, dial)
	if !ok {
		return "", false
	}
	saw := fmt.Sprintf("the agent's frames are JSON-RPC 2.0 (%s), and asked in ACP, it answers initialize with protocolVersion %s", h.jsonRPC, v.Raw)
	switch {
	case v.Type == gjson.Number && v.Int() >= 1:
		return fmt.Sprintf("%s: it speaks ACP itself, use --%s acp (dialect = \"acp\" in its agent block)", saw, launch.FlagDialect), true
	case v.Type == gjson.String && strings.HasPrefix(v.Str, "0."):
		return fmt.Sprintf("%s: it speaks legacy ACP, use --%s acp-v0", saw, launch.FlagDialect), true
	}
	return "", false
}

// acpFamily reports whether dialect speaks ACP's JSON-RPC itself.
func acpFamily(dialect string) bool {
	return dialect == "acp" || dialect == "acp-v2" || dialect == "acp-v0"
}

// isHTTP reports whether spec reaches its agent over Streamable HTTP.
func isHTTP(spec launch.Agent) bool {
	if spec.WebSocket == nil {
		return false
	}
	u := strings.ToLower(spec.WebSocket.URL)
	return strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")
}

type dialFunc = func(context.Context, bridge.Spawn) (bridge.Link, error)

// heardText says what the agent sent, for a failed step.
func (d *doctor) heardText(h heardSoFar) string {
	var parts []string
	switch {
	case h.received == 0 && h.noiseN == 0:
		parts = append(parts, fmt.Sprintf("the agent sent nothing (acp-bridge sent it %d frame(s))", h.sent))
	case h.received > 0:
		parts = append(parts, fmt.Sprintf("the agent sent %d frame(s): %s", h.received, strings.Join(h.frames, " | ")))
	}
	if h.noiseN > 0 {
		parts = append(parts, fmt.Sprintf("it printed %d line(s) that are not JSON: %s", h.noiseN, strings.Join(quoteAll(h.noise), " | ")))
	}
	return strings.Join(parts, "; ")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// wrongDialect reports a step that failed although the link is up: from
// what the agent sent (or did not), it names the likely cause — a connect
// frame that never came, an agent that speaks ACP or legacy ACP, output
// that is not JSON — and what to do.
func (d *doctor) wrongDialect(ctx context.Context, step string, err error, spec launch.Agent, dial dialFunc) bool {
	h := d.heard.snapshot()
	what := fmt.Sprintf("%s: %v; %s", step, err, d.heardText(h))
	pick := fmt.Sprintf("pick the dialect it speaks (--%s NAME, or dialect = \"NAME\" in its agent block; 'acp-bridge dialects' lists them)", launch.FlagDialect)
	// A profile waiting for its connect frame: say which frame never came.
	if h.expect != "" && step == "initialize" {
		return d.fail(fmt.Sprintf("%s: %s, which never came; %s", step, strings.TrimPrefix(h.expect, "profile "), d.heardText(h)),
			"the agent does not greet as dialect "+spec.Dialect+" expects: check the URL or command, or "+pick)
	}
	// Ask the agent itself, on a link of its own, whether it speaks ACP.
	if spec.Dialect != "acp" {
		if v, ok := d.probeACP(ctx, dial); ok {
			switch {
			case v.Type == gjson.Number && v.Int() >= 1:
				return d.fail(what+fmt.Sprintf("; asked in ACP, the agent answers initialize with protocolVersion %s", v.Raw),
					fmt.Sprintf("the agent speaks ACP itself: use --%s acp (dialect = \"acp\" in its agent block)", launch.FlagDialect))
			case v.Type == gjson.String && strings.HasPrefix(v.Str, "0.") && spec.Dialect != "acp-v0":
				return d.fail(what+fmt.Sprintf("; asked in ACP, the agent answers initialize with protocolVersion %s", v.Raw),
					fmt.Sprintf("the agent speaks legacy ACP %s: use --%s acp-v0", v.Str, launch.FlagDialect))
			}
		}
	}
	if h.received == 0 && h.noiseN > 0 {
		return d.fail(what, fmt.Sprintf("the agent writes text, not the JSON frames of dialect %s, on its stdout: if it is an agent's log, make it log to stderr; else %s", spec.Dialect, pick))
	}
	if h.received == 0 {
		return d.fail(what, fmt.Sprintf("check that the agent speaks dialect %s over this transport (see 'acp-bridge dialects'), and run with --log-level debug to see its output", spec.Dialect))
	}
	return d.fail(what, "the agent does not seem to speak dialect "+spec.Dialect+": "+pick)
}

// probeACP opens a link of its own to the agent, sends an ACP initialize
// and returns the protocolVersion of the answer, if one comes within a few
// seconds.
func (d *doctor) probeACP(ctx context.Context, dial dialFunc) (gjson.Result, bool) {
	stop := d.waiting("the agent's answer to an ACP initialize")
	defer stop()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	link, err := dial(pctx, bridge.Spawn{})
	if err != nil {
		return gjson.Result{}, false
	}
	defer link.Close()
	const id = `"acp-bridge-doctor-probe"`
	if err := link.Write(pctx, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)); err != nil {
		return gjson.Result{}, false
	}
	for {
		frame, err := link.Read(pctx)
		if err != nil {
			return gjson.Result{}, false
		}
		if gjson.GetBytes(frame, "jsonrpc").Str == "2.0" && gjson.GetBytes(frame, "id").Raw == id {
			v := gjson.GetBytes(frame, "result.protocolVersion")
			return v, v.Exists()
		}
	}
}

// linkCause returns a cause for err when it is the engine saying the agent
// link could not be opened or was lost, else nil.
func linkCause(err error) error {
	var rpcErr *acpclient.Error
	if !errors.As(err, &rpcErr) {
		return nil
	}
	msg := rpcErr.Message
	for _, marker := range []string{"unreachable", "handshake", "not started", "executable", "exited", "certificate", "x509"} {
		if strings.Contains(msg, marker) {
			return errors.New(msg)
		}
	}
	if httpStatus(msg) != 0 {
		return errors.New(msg) // a Streamable HTTP endpoint refused the request
	}
	return nil
}

// httpStatus returns the status of the first "HTTP NNN" in msg, else 0.
func httpStatus(msg string) int {
	for rest := msg; ; {
		i := strings.Index(rest, "HTTP ")
		if i < 0 {
			return 0
		}
		rest = rest[i+len("HTTP "):]
		if len(rest) >= 3 {
			if n, err := strconv.Atoi(rest[:3]); err == nil && n >= 100 && n <= 599 && (len(rest) == 3 || rest[3] < '0' || rest[3] > '9') {
				return n
			}
		}
	}
}

// fixDial says what to do about a failed WebSocket dial, by its cause.
func fixDial(err error, spec launch.Agent) string {
	var unknownCA x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	var hostname x509.HostnameError
	var opErr *net.OpError
	msg := err.Error()
	switch {
	case errors.As(err, &unknownCA) || errors.As(err, &verify) && errors.As(verify.Err, &unknownCA) || strings.Contains(msg, "certificate signed by unknown authority"):
		return fmt.Sprintf("TLS: the agent's certificate is signed by a CA this machine does not trust; give that CA's PEM file with --%s FILE (ca_file in the websocket block)", launch.FlagCAFile)
	case errors.As(err, &hostname) || strings.Contains(msg, "certificate is valid for"):
		return "TLS: the agent's certificate is not valid for the host in the URL; use the host name the certificate names"
	case strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:"):
		return "TLS: the secure handshake failed; check that the agent serves wss:// on this port (or use ws:// if it serves plain WebSocket)"
	case httpStatus(msg) == 401 || httpStatus(msg) == 403:
		how := fmt.Sprintf("--%s Authorization=ENVVAR, the variable holding \"Bearer <token>\" (or headers = { Authorization = … } in the agent's websocket block)", launch.FlagHeader)
		if len(spec.WebSocket.Header) > 0 || strings.Contains(spec.WebSocket.URL, "@") {
			return fmt.Sprintf("the server wants a token and refused the credentials sent (HTTP %d): check that the header's variable holds a valid token (%s)", httpStatus(msg), how)
		}
		return fmt.Sprintf("the server wants a token (HTTP %d) and none was sent: give it with %s", httpStatus(msg), how)
	case httpStatus(msg) == 404:
		if isHTTP(spec) {
			return "the URL's path is not the agent's ACP endpoint; check the path in the URL"
		}
		return "the URL's path is not the agent's WebSocket endpoint; check the path in the URL"
	case strings.Contains(msg, "handshake refused"):
		return "the server at this URL answered HTTP but did not accept a WebSocket; check the URL"
	case strings.Contains(msg, "connection refused"):
		return fmt.Sprintf("nothing listens at %s: start the agent or fix the URL (its host and port)", spec.WebSocket.URL)
	case strings.Contains(msg, "no such host"):
		return fmt.Sprintf("the host in %s is not known: fix the URL's host name", spec.WebSocket.URL)
	case strings.Contains(msg, "unreachable") || errors.As(err, &opErr):
		return fmt.Sprintf("nothing answers at %s: start the agent, or check the host and port in the URL (and any firewall between)", spec.WebSocket.URL)
	case httpStatus(msg) != 0:
		return fmt.Sprintf("the server at %s refused the request (HTTP %d): check that the URL is the agent's ACP endpoint, and see its words above", spec.WebSocket.URL, httpStatus(msg))
	}
	return "run with --log-level debug for the details of the dial"
}

// fixLink says what to do when the engine could not open or keep the link.
func fixLink(cause error, spec launch.Agent) string {
	msg := cause.Error()
	switch {
	case errors.Is(cause, fs.ErrNotExist) || strings.Contains(msg, "not started"):
		return "the agent's command could not be started: check the command and its working directory (dir)"
	case strings.Contains(msg, "exited"):
		return "the agent exited: run its command by hand to see why, or run doctor with --log-level debug to see its stderr"
	}
	if spec.WebSocket != nil {
		return fixDial(cause, spec)
	}
	return "run doctor with --log-level debug to see the agent's stderr"
}

// snippet returns b for a report: at most n bytes, on one line.
func snippet(b []byte, n int) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
