// Package demo is `acp-bridge demo`: a few seconds that show a newcomer what
// the bridge does, with no network and no configuration. It starts a built-in
// agent that speaks a WebSocket JSON format of its own, not ACP (Open
// Interpreter's LMC, docs/agent-protocols.md#open-interpreter), on loopback,
// puts the real bridge in front of it with the open-interpreter rule profile
// (composed by package launch, as the command line composes it), and drives
// one scripted ACP v1 session through it from a small built-in editor (package
// acpclient): a prompt that streams, runs a tool after a permission request
// and ends its turn, then a prompt the editor cancels mid-stream. The
// conversation is printed readably, or, with Raw, as every ACP line on the
// editor side and every frame on the agent side, which shows the translation
// both ways.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/acpclient"
	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

// Options configures Run.
type Options struct {
	// Raw prints every ACP line the editor sends ("→ ") and receives ("← "),
	// and every frame the agent receives ("→agent ") and sends
	// ("agent→ "), instead of the readable view.
	Raw bool
	// Out is where the conversation is printed; nil means io.Discard. Only
	// the conversation goes there: logs go to Logger.
	Out io.Writer
	// Logger receives the bridge's and the demo agent's logs; nil means none.
	Logger hclog.Logger
	// Version is the bridge version reported in agentInfo; "" means "dev".
	Version string
	// Progress, if not nil, shows which step the demo is on while it
	// waits (launch.NewProgress gives one only for a terminal). Its status
	// line is erased before each write to Out.
	Progress *launch.Progress
}

// Demo timing.
const (
	// scriptTimeout bounds the whole scripted session, so a broken bridge
	// makes the demo fail instead of hanging; it normally takes about 1.5 s.
	scriptTimeout = 20 * time.Second
	// shutdownTimeout bounds the wait for Serve once the editor has closed
	// the bridge's input.
	shutdownTimeout = 5 * time.Second
	// cancelAfterChunks is how many message chunks of the slow prompt the
	// editor shows before it sends session/cancel.
	cancelAfterChunks = 3
)

// Scripted prompts. The demo agent picks its script by the prompt's words
// (see Agent).
const (
	filesPrompt = "list the files"
	slowPrompt  = "count slowly to 20"
)

// Run plays the demo once and returns when the bridge has shut down. It
// returns an error when the scripted session does not go as scripted (the
// demo doubles as a smoke test), when ctx ends first, or when Out fails.
func Run(ctx context.Context, opt Options) error {
	log := opt.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	out := opt.Out
	if out == nil {
		out = io.Discard
	}
	version := opt.Version
	if version == "" {
		version = "dev"
	}
	p := &printer{w: out, raw: opt.Raw, progress: opt.Progress}
	defer opt.Progress.Clear()
	p.step("starting the demo agent (a WebSocket server on loopback)")

	cwd, err := os.Getwd()
	if err != nil {
		cwd = os.TempDir()
	}

	// The agent: a real WebSocket server on loopback.
	agent := &Agent{
		Logger: log.Named("demo-agent"),
		Dir:    cwd,
		Tap: func(dir Direction, frame []byte) {
			if dir == ToAgent {
				p.rawLine("→agent ", frame)
			} else {
				p.rawLine("agent→ ", frame)
			}
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo: starting the demo agent: %w", err)
	}
	srv := &http.Server{
		Handler:           agent,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.Named("demo-agent").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	srvDone := make(chan struct{})
	go func() {
		defer close(srvDone)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("demo agent server failed", "error", err)
		}
	}()
	defer func() {
		srv.Close()
		agent.Close()
		<-srvDone
	}()
	url := "ws://" + ln.Addr().String() + "/"

	// The bridge: composed exactly as `acp-bridge --dialect open-interpreter
	// --url URL` composes it, on pipes instead of stdio.
	p.step("starting the bridge in front of it")
	b, err := bridgeFor(url, version, log.Named("bridge"))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	editorToBridgeR, editorToBridgeW := io.Pipe() // the bridge's stdin
	bridgeToEditorR, bridgeToEditorW := io.Pipe() // the bridge's stdout

	serveCtx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	serveDone := make(chan error, 1)
	go func() {
		serveDone <- b.Serve(serveCtx, editorToBridgeR, bridgeToEditorW)
	}()

	ed := newEditor(p, log.Named("demo-editor"))
	ed.conn = acpclient.New(bridgeToEditorR, editorToBridgeW, acpclient.Handler{
		Request:      ed.request,
		Notification: ed.notification,
		Tap: func(out bool, line []byte) {
			if out {
				p.rawLine("→ ", line)
			} else {
				p.rawLine("← ", line)
			}
		},
	})

	p.header(url, demoDialect)
	scriptCtx, cancelScript := context.WithTimeout(ctx, scriptTimeout)
	scriptErr := ed.script(scriptCtx, cwd)
	cancelScript()

	// Shut down as an editor does: close the bridge's input and wait for
	// Serve to return. After a successful script every editor request has
	// its answer already; after a failed one Serve answers the rest.
	p.step("shutting the bridge down")
	ed.conn.Close()
	var serveErr error
	select {
	case serveErr = <-serveDone:
	case <-time.After(shutdownTimeout):
		stopServe()
		serveErr = <-serveDone
		if serveErr == nil {
			serveErr = fmt.Errorf("the bridge did not stop within %v of its input closing", shutdownTimeout)
		}
	}
	// Serve does not read or write the pipes any more: release anything
	// still blocked on them and let the editor's reader see the end.
	editorToBridgeR.CloseWithError(io.ErrClosedPipe)
	bridgeToEditorW.Close()
	<-ed.conn.Done()

	if scriptErr == nil && serveErr == nil {
		p.footer()
	}
	switch {
	case scriptErr != nil:
		return fmt.Errorf("demo: %w", scriptErr)
	case serveErr != nil:
		return fmt.Errorf("demo: bridge: %w", serveErr)
	}
	return p.failed()
}

// demoDialect is the rule profile the demo agent's format is bridged with.
const demoDialect = "open-interpreter"

// bridgeFor composes the bridge in front of the demo agent at url through
// package launch, as the command line would for --dialect open-interpreter
// --url url.
func bridgeFor(url, version string, log hclog.Logger) (*bridge.Bridge, error) {
	flags := launch.Flags{URL: url, Dialect: demoDialect, Set: map[string]bool{launch.FlagDialect: true}}
	spec, err := launch.ResolveAgent(&config.Config{}, flags, func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, err
	}
	spec.Name = "demo"
	dialect, newTranslator, err := launch.Configure(spec, nil, io.Discard)
	if err != nil {
		return nil, err
	}
	// A short grace, so that the cancelled turn ends promptly even if the
	// agent were slow to.
	return launch.NewBridge(spec, dialect, newTranslator, launch.Settings{CancelGrace: 2 * time.Second}, log, version), nil
}

// editor is the scripted ACP v1 editor: an acpclient connection whose
// handlers render what the agent sends; the script runs on Run's goroutine
// and makes requests.
type editor struct {
	p    *printer
	log  hclog.Logger
	conn *acpclient.Conn

	mu      sync.Mutex
	waiters []*chunkWaiter    // notified on agent_message_chunk
	tools   map[string]string // toolCallId → title, for the readable view
}

// chunkWaiter is closed after n more agent message chunks.
type chunkWaiter struct {
	n  int
	ch chan struct{}
}

func newEditor(p *printer, log hclog.Logger) *editor {
	return &editor{p: p, log: log, tools: make(map[string]string)}
}

// script plays the scripted session.
func (e *editor) script(ctx context.Context, cwd string) error {
	// initialize: the editor can read and write files itself, so the
	// engine's local fs fallback stays out of the way.
	e.p.step("initialize: the bridge dials the agent")
	res, err := e.call(ctx, "initialize", map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": true, "writeTextFile": true},
			"terminal": false,
		},
		"clientInfo": map[string]string{"name": "acp-bridge-demo-editor", "version": "1"},
	})
	if err != nil {
		return err
	}
	e.p.line("editor", fmt.Sprintf("→ %-18s %s", "initialize", describeAgent(res)))

	e.p.step("session/new")
	res, err = e.call(ctx, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if err != nil {
		return err
	}
	session := gjson.GetBytes(res, "sessionId").Str
	if session == "" {
		return fmt.Errorf("session/new answered %s: no sessionId", res)
	}
	e.p.line("editor", fmt.Sprintf("→ %-18s session %s", "session/new", session))

	// First turn: streaming, a tool call behind a permission request, the
	// end of the turn.
	e.p.line("you", "> "+filesPrompt)
	e.p.step("first prompt: waiting for the agent")
	res, err = e.call(ctx, "session/prompt", promptParams(session, filesPrompt))
	if err != nil {
		return err
	}
	if stop := gjson.GetBytes(res, "stopReason").Str; stop != "end_turn" {
		return fmt.Errorf("the first prompt ended with stopReason %q, want end_turn", stop)
	}
	e.p.line("turn", "end_turn")

	// Second turn: the agent streams slowly and the editor cancels it.
	e.p.line("you", "> "+slowPrompt)
	e.p.step("second prompt: the editor cancels it mid-stream")
	seen := e.afterChunks(cancelAfterChunks)
	prompt, err := e.conn.Start("session/prompt", promptParams(session, slowPrompt))
	if err != nil {
		return err
	}
	select {
	case <-seen:
	case <-prompt.Done():
		res, err := prompt.Wait(ctx)
		return fmt.Errorf("the slow prompt ended before the editor cancelled it: %s %v", res, err)
	case <-ctx.Done():
		return fmt.Errorf("waiting for the slow prompt to stream: %w", ctx.Err())
	}
	e.p.line("editor", "→ session/cancel")
	if err := e.conn.Notify("session/cancel", map[string]string{"sessionId": session}); err != nil {
		return err
	}
	res, err = prompt.Wait(ctx)
	if err != nil {
		return fmt.Errorf("session/prompt failed: %w", err)
	}
	if stop := gjson.GetBytes(res, "stopReason").Str; stop != "cancelled" {
		return fmt.Errorf("the cancelled prompt ended with stopReason %q, want cancelled", stop)
	}
	e.p.line("turn", "cancelled")
	return nil
}

// call sends a request and waits for its result; an error answer becomes an
// error naming the method.
func (e *editor) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	res, err := e.conn.Call(ctx, method, params)
	if err != nil {
		return nil, fmt.Errorf("%s failed: %w", method, err)
	}
	return res, nil
}

// afterChunks returns a channel closed after n more agent message chunks.
func (e *editor) afterChunks(n int) <-chan struct{} {
	w := &chunkWaiter{n: n, ch: make(chan struct{})}
	e.mu.Lock()
	e.waiters = append(e.waiters, w)
	e.mu.Unlock()
	return w.ch
}

// notification renders one notification from the bridge.
func (e *editor) notification(method string, params json.RawMessage) {
	if method == "session/update" {
		e.update(params)
	}
}

// describeAgent renders the initialize answer for the readable view: the
// agent behind the bridge (which the engine reports under
// _meta["acp-bridge"]) and the bridge itself (agentInfo).
func describeAgent(res json.RawMessage) string {
	r := gjson.ParseBytes(res)
	meta := r.Get(`_meta.acp-bridge`)
	behind := strings.TrimSpace(meta.Get("agentInfo.name").Str + " " + meta.Get("agentInfo.version").Str)
	if behind == "" {
		behind = meta.Get("agent").Str
	}
	via := strings.TrimSpace(r.Get("agentInfo.name").Str + " " + r.Get("agentInfo.version").Str)
	var notes []string
	if via != "" {
		notes = append(notes, "via "+via)
	}
	if d := meta.Get("dialect").Str; d != "" {
		notes = append(notes, "dialect "+d)
	}
	if v := r.Get("protocolVersion"); v.Exists() {
		notes = append(notes, "ACP protocol "+v.Raw)
	}
	if behind == "" {
		behind = "ready"
	}
	if len(notes) == 0 {
		return "agent: " + behind
	}
	return "agent: " + behind + " (" + strings.Join(notes, ", ") + ")"
}

func promptParams(session, text string) map[string]any {
	return map[string]any{
		"sessionId": session,
		"prompt":    []any{map[string]string{"type": "text", "text": text}},
	}
}

// request answers one request from the bridge.
func (e *editor) request(method string, raw json.RawMessage) (any, *acpclient.Error) {
	switch method {
	case "session/request_permission":
		params := gjson.ParseBytes(raw)
		var names []string
		choice, choiceName := "", ""
		// The scripted user allows once: the first allow_once option,
		// else the first option offered.
		params.Get("options").ForEach(func(_, o gjson.Result) bool {
			names = append(names, o.Get("name").Str)
			if choice == "" && o.Get("kind").Str == "allow_once" {
				choice, choiceName = o.Get("optionId").Str, o.Get("name").Str
			}
			return true
		})
		if choice == "" {
			if first := params.Get("options.0"); first.Exists() {
				choice, choiceName = first.Get("optionId").Str, first.Get("name").Str
			}
		}
		toolID := params.Get("toolCall.toolCallId").Str
		title := params.Get("toolCall.title").Str
		if title == "" {
			title = e.toolTitle(toolID)
		}
		var outcome any = map[string]string{"outcome": "cancelled"}
		if choice != "" {
			outcome = map[string]string{"outcome": "selected", "optionId": choice}
		}
		e.p.permission("tool:"+toolID, title, names, choiceName)
		return map[string]any{"outcome": outcome}, nil
	case "fs/read_text_file", "fs/write_text_file":
		// Advertised so that the bridge does not fall back to the disk,
		// but the demo agent never asks.
		return nil, &acpclient.Error{Code: translate.CodeInternalError, Message: "the demo editor does not serve files"}
	}
	return nil, &acpclient.Error{Code: translate.CodeMethodNotFound, Message: fmt.Sprintf("the demo editor does not implement %q", method)}
}

func (e *editor) toolTitle(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t := e.tools[id]; t != "" {
		return t
	}
	return id
}

// update renders one session/update in the readable view.
func (e *editor) update(params json.RawMessage) {
	u := gjson.GetBytes(params, "update")
	switch kind := u.Get("sessionUpdate").Str; kind {
	case "agent_message_chunk":
		e.p.stream("msg", "agent", "", contentText(u.Get("content")))
		e.mu.Lock()
		kept := e.waiters[:0]
		for _, w := range e.waiters {
			if w.n--; w.n <= 0 {
				close(w.ch)
				continue
			}
			kept = append(kept, w)
		}
		e.waiters = kept
		e.mu.Unlock()
	case "agent_thought_chunk":
		e.p.stream("thought", "agent", "(thinking) ", contentText(u.Get("content")))
	case "user_message_chunk":
		e.p.stream("user", "you", "", contentText(u.Get("content")))
	case "tool_call":
		id, title := u.Get("toolCallId").Str, u.Get("title").Str
		e.mu.Lock()
		e.tools[id] = title
		e.mu.Unlock()
		status := u.Get("status").Str
		if status == "" {
			status = "pending" // the default (schema: ToolCall.status)
		}
		toolKind := u.Get("kind").Str
		if toolKind == "" {
			toolKind = "other"
		}
		text := fmt.Sprintf("%s %s  [%s] %s", statusIcon(status), title, toolKind, status)
		content := toolContent(u.Get("content"))
		if len(content) == 1 {
			// A one-line description fits on the tool call's line, which
			// stays open for the permission request that usually follows.
			text += " — " + content[0]
			content = nil
		}
		e.p.openLine("tool:"+id, "tool", text)
		e.p.indented(content)
	case "tool_call_update":
		id := u.Get("toolCallId").Str
		title := u.Get("title").Str
		if title != "" {
			e.mu.Lock()
			e.tools[id] = title
			e.mu.Unlock()
		} else {
			title = e.toolTitle(id)
		}
		status := u.Get("status").Str
		text := title
		if status != "" {
			text = fmt.Sprintf("%s %s: %s", statusIcon(status), title, status)
		}
		e.p.line("tool", text)
		e.p.indented(toolContent(u.Get("content")))
	case "plan":
		var lines []string
		u.Get("entries").ForEach(func(_, en gjson.Result) bool {
			lines = append(lines, fmt.Sprintf("[%s] %s", en.Get("status").Str, en.Get("content").Str))
			return true
		})
		e.p.line("plan", fmt.Sprintf("%d entries", len(lines)))
		e.p.indented(lines)
	default:
		e.p.line("update", kind)
	}
}

func statusIcon(status string) string {
	switch status {
	case "pending":
		return "⏳"
	case "in_progress":
		return "⚙"
	case "completed":
		return "✓"
	case "failed":
		return "✗"
	}
	return "•"
}

// contentText is the text of a ContentBlock, or a placeholder for other
// block types.
func contentText(c gjson.Result) string {
	if t := c.Get("type").Str; t != "text" {
		return "[" + t + "]"
	}
	return c.Get("text").Str
}

// toolContent renders ToolCallContent items as lines, dropping markdown
// code fences.
func toolContent(items gjson.Result) []string {
	var lines []string
	items.ForEach(func(_, it gjson.Result) bool {
		switch it.Get("type").Str {
		case "content":
			for _, l := range strings.Split(strings.TrimRight(contentText(it.Get("content")), "\n"), "\n") {
				if !strings.HasPrefix(l, "```") {
					lines = append(lines, l)
				}
			}
		case "diff":
			lines = append(lines, "diff "+it.Get("path").Str)
		case "terminal":
			lines = append(lines, "terminal "+it.Get("terminalId").Str)
		}
		return true
	})
	return lines
}

// printer writes the conversation to Options.Out. It is safe for concurrent
// use: the editor's loops and the agent's connections all print. In the
// readable view, streamed chunks extend an open line until something else
// is printed; in the raw view only rawLine prints.
type printer struct {
	mu   sync.Mutex
	w    io.Writer
	raw  bool
	open string // key of the line left open, "" at the start of a line
	err  error  // first write error
	// progress shows the current step between lines; nil for none.
	progress *launch.Progress
}

// step shows what the demo is waiting for, when nothing is half printed.
func (p *printer) step(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open == "" {
		p.progress.Step("demo: %s", text)
	}
}

// labelWidth aligns the readable view's text after its labels.
const labelWidth = 7

func (p *printer) write(s string) {
	if p.err != nil {
		return
	}
	p.progress.Clear()
	_, p.err = io.WriteString(p.w, s)
}

func (p *printer) closeLine() {
	if p.open != "" {
		p.write("\n")
		p.open = ""
	}
}

func label(l string) string {
	return fmt.Sprintf("%-*s", labelWidth, l)
}

// rawLine prints one frame with a direction prefix (raw view only).
func (p *printer) rawLine(prefix string, frame []byte) {
	if !p.raw {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.write(prefix + string(frame) + "\n")
}

// line prints one whole line (readable view only).
func (p *printer) line(lbl, text string) {
	if p.raw {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLine()
	p.write(label(lbl) + text + "\n")
}

// openLine prints a line and leaves it open under key, so that a following
// permission request for the same tool call can finish it.
func (p *printer) openLine(key, lbl, text string) {
	if p.raw {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLine()
	p.write(label(lbl) + text)
	p.open = key
}

// indented prints lines under the previous one (readable view only).
func (p *printer) indented(lines []string) {
	if p.raw || len(lines) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLine()
	for _, l := range lines {
		p.write(strings.Repeat(" ", labelWidth+2) + l + "\n")
	}
}

// stream appends a chunk to the open line with key, starting a new line
// (label, then intro) when another line is open.
func (p *printer) stream(key, lbl, intro, text string) {
	if p.raw {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open != key {
		p.closeLine()
		p.write(label(lbl) + intro)
		p.open = key
		// A chunk that continues the message after a tool call starts
		// with a space; at the start of a line it would misalign.
		text = strings.TrimLeft(text, " ")
	}
	p.write(strings.ReplaceAll(text, "\n", "\n"+strings.Repeat(" ", labelWidth)))
}

// permission prints a permission request and the scripted choice, right
// under the tool call's line when nothing came in between.
func (p *printer) permission(key, title string, options []string, chose string) {
	if p.raw {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	text := fmt.Sprintf("permission? options: %s → chose %s", strings.Join(options, " / "), chose)
	if chose == "" {
		text = "permission? no options → cancelled"
	}
	if p.open == key {
		p.write("\n" + strings.Repeat(" ", labelWidth+2) + text + "\n")
		p.open = ""
		return
	}
	p.closeLine()
	p.write(label("tool") + title + " → " + text + "\n")
}

func (p *printer) header(url, dialect string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.raw {
		p.write("# acp-bridge demo --raw: scripted ACP v1 editor ⇄ acp-bridge (dialect " + dialect + ") ⇄ built-in Open Interpreter-style agent on " + url + "\n")
		p.write("# \"→ \" editor to bridge and \"← \" bridge to editor: ACP v1, one JSON-RPC message per line\n")
		p.write("# \"→agent \" bridge to agent and \"agent→ \" agent to bridge: the agent's own LMC JSON over a WebSocket (not JSON-RPC)\n")
		return
	}
	p.write("acp-bridge demo: a scripted ACP v1 editor talks to a built-in agent that speaks its own WebSocket JSON,\n")
	p.write("through the real bridge and a rule profile that translates it.\n\n")
	p.write("  scripted editor (ACP v1)  ⇄  acp-bridge, dialect " + dialect + "  ⇄  Open Interpreter LMC agent on " + url + "\n\n")
}

func (p *printer) footer() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLine()
	if p.raw {
		p.write("# done: every editor request was answered and the bridge shut down cleanly\n")
		return
	}
	p.write("\nDone: the real bridge engine translated ACP v1 to the agent's own WebSocket JSON and back, through the\n")
	p.write("open-interpreter rule profile (acp-bridge dialects show open-interpreter);\n")
	p.write("every editor request was answered and the bridge shut down cleanly.\n")
	p.write("Run `acp-bridge demo --raw` to see each ACP line and the agent's frames they were translated to and from.\n")
}

// failed returns the first error writing to Out.
func (p *printer) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return fmt.Errorf("demo: writing the conversation: %w", p.err)
	}
	return nil
}
