// Package demo is `acp-bridge demo`: a few seconds that show a newcomer what
// the bridge does, with no network and no configuration. It starts a built-in
// agent that speaks the legacy Zed ACP 0.0.x protocol (legacy-formats.md §1)
// behind a real WebSocket on loopback, runs the real bridge engine in-process
// with the acp-v0 dialect, and drives one scripted ACP v1 session through it
// from a small built-in editor: a prompt that streams, runs a tool after a
// permission request and ends its turn, then a prompt the editor cancels
// mid-stream. The conversation is printed readably, or, with Raw, as every
// ACP line on the editor side and every legacy frame on the agent side, which
// shows the translation both ways.
//
// The editor is hand-written JSON-RPC over pipes, not acp-go-sdk: the SDK is
// a test-only dependency and must not become part of the binary.
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/ndjson"
	"github.com/acp-bridge/acp-bridge/legacy"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acpv0"
	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

// Options configures Run.
type Options struct {
	// Raw prints every ACP line the editor sends ("→ ") and receives ("← "),
	// and every legacy frame the agent receives ("→agent ") and sends
	// ("agent→ "), instead of the readable view.
	Raw bool
	// Out is where the conversation is printed; nil means io.Discard. Only
	// the conversation goes there: logs go to Logger.
	Out io.Writer
	// Logger receives the bridge's and the demo agent's logs; nil means none.
	Logger hclog.Logger
	// Version is the bridge version reported in agentInfo; "" means "dev".
	Version string
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
	p := &printer{w: out, raw: opt.Raw}

	newTranslator, diags := acpv0.Dialect.Configure(nil)
	if diags.HasErrors() {
		return fmt.Errorf("demo: configuring the %s dialect: %s", acpv0.Dialect.Name, diags.Error())
	}

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

	// The bridge: the real engine, wired as main.go wires it for a
	// WebSocket agent, on pipes instead of stdio.
	b := &bridge.Bridge{
		Dialect:       acpv0.Dialect,
		NewTranslator: newTranslator,
		Dial: func(ctx context.Context, s bridge.Spawn) (bridge.Link, error) {
			c, err := legacy.WebSocket{URL: url, Logger: log.Named("ws")}.Dial(ctx)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		AgentName:   "demo",
		Version:     version,
		Logger:      log.Named("bridge"),
		CancelGrace: 2 * time.Second,
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
	go ed.writeLoop(editorToBridgeW)
	go ed.readLoop(bridgeToEditorR)

	p.header(url, acpv0.Dialect.Name)
	scriptCtx, cancelScript := context.WithTimeout(ctx, scriptTimeout)
	scriptErr := ed.script(scriptCtx, cwd)
	cancelScript()

	// Shut down as an editor does: close the bridge's input and wait for
	// Serve to return. After a successful script every editor request has
	// its answer already; after a failed one Serve answers the rest.
	ed.closeOutput()
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
	<-ed.readDone

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

// rpcAnswer is the bridge's answer to one editor request.
type rpcAnswer struct {
	result json.RawMessage
	err    json.RawMessage
}

// editor is the scripted ACP v1 editor. Its writeLoop is the only writer of
// the bridge's input; its readLoop is the only reader of the bridge's output
// and handles updates and the bridge's requests; the script runs on Run's
// goroutine and makes requests.
type editor struct {
	p   *printer
	log hclog.Logger

	frames chan []byte // to writeLoop; closed by closeOutput

	mu      sync.Mutex
	closed  bool                   // frames is closed
	nextID  int                    // the editor's request ids count from 1
	pending map[int]chan rpcAnswer // requests awaiting their answer
	waiters []*chunkWaiter         // notified on agent_message_chunk
	tools   map[string]string      // toolCallId → title, for the readable view

	readDone chan struct{} // closed when readLoop returns
}

// chunkWaiter is closed after n more agent message chunks.
type chunkWaiter struct {
	n  int
	ch chan struct{}
}

func newEditor(p *printer, log hclog.Logger) *editor {
	return &editor{
		p:        p,
		log:      log,
		frames:   make(chan []byte, 64),
		nextID:   1,
		pending:  make(map[int]chan rpcAnswer),
		tools:    make(map[string]string),
		readDone: make(chan struct{}),
	}
}

// script plays the scripted session.
func (e *editor) script(ctx context.Context, cwd string) error {
	// initialize: the editor can read and write files itself, so the
	// engine's local fs fallback stays out of the way.
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
	seen := e.afterChunks(cancelAfterChunks)
	answer, err := e.start("session/prompt", promptParams(session, slowPrompt))
	if err != nil {
		return err
	}
	select {
	case <-seen:
	case a := <-answer:
		return fmt.Errorf("the slow prompt ended before the editor cancelled it: %s%s", a.result, a.err)
	case <-ctx.Done():
		return fmt.Errorf("waiting for the slow prompt to stream: %w", ctx.Err())
	case <-e.readDone:
		return errors.New("the bridge closed its output")
	}
	e.p.line("editor", "→ session/cancel")
	e.notify("session/cancel", map[string]string{"sessionId": session})
	res, err = e.wait(ctx, "session/prompt", answer)
	if err != nil {
		return err
	}
	if stop := gjson.GetBytes(res, "stopReason").Str; stop != "cancelled" {
		return fmt.Errorf("the cancelled prompt ended with stopReason %q, want cancelled", stop)
	}
	e.p.line("turn", "cancelled")
	return nil
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

// call sends a request and waits for its result; an error answer becomes an
// error.
func (e *editor) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch, err := e.start(method, params)
	if err != nil {
		return nil, err
	}
	return e.wait(ctx, method, ch)
}

// start sends a request and returns the channel its answer will arrive on.
func (e *editor) start(method string, params any) (<-chan rpcAnswer, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	ch := make(chan rpcAnswer, 1)
	e.mu.Lock()
	id := e.nextID
	e.nextID++
	e.pending[id] = ch
	e.mu.Unlock()
	e.send(translate.RequestFrame(translate.IntID(uint64(id)), method, b))
	return ch, nil
}

// wait waits for an answer started by start.
func (e *editor) wait(ctx context.Context, method string, ch <-chan rpcAnswer) (json.RawMessage, error) {
	select {
	case a := <-ch:
		if a.err != nil {
			return nil, fmt.Errorf("%s failed: %s", method, a.err)
		}
		return a.result, nil
	case <-e.readDone:
		// readLoop may have delivered just before it returned.
		select {
		case a := <-ch:
			if a.err != nil {
				return nil, fmt.Errorf("%s failed: %s", method, a.err)
			}
			return a.result, nil
		default:
		}
		return nil, fmt.Errorf("%s: the bridge closed its output before answering", method)
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the answer to %s: %w", method, ctx.Err())
	}
}

func (e *editor) notify(method string, params any) {
	b, _ := json.Marshal(params)
	e.send(translate.NotificationFrame(method, b))
}

// send queues one frame for writeLoop; after closeOutput it drops it.
func (e *editor) send(frame []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		e.log.Debug("dropping a frame sent after the editor closed its output")
		return
	}
	e.frames <- frame // writeLoop always drains, so this never blocks for long
}

// closeOutput makes writeLoop close the bridge's input once every queued
// frame is written.
func (e *editor) closeOutput() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		close(e.frames)
	}
}

// afterChunks returns a channel closed after n more agent message chunks.
func (e *editor) afterChunks(n int) <-chan struct{} {
	w := &chunkWaiter{n: n, ch: make(chan struct{})}
	e.mu.Lock()
	e.waiters = append(e.waiters, w)
	e.mu.Unlock()
	return w.ch
}

// writeLoop writes frames to the bridge's input, one per line, and closes it
// when frames is closed. After a write error it keeps draining frames so
// that senders never block.
func (e *editor) writeLoop(w *io.PipeWriter) {
	var werr error
	for frame := range e.frames {
		if werr != nil {
			continue
		}
		e.p.rawLine("→ ", frame)
		if _, werr = w.Write(append(frame, '\n')); werr != nil {
			e.log.Debug("writing to the bridge failed", "error", werr)
		}
	}
	w.Close()
}

// readLoop reads the bridge's output until it ends.
func (e *editor) readLoop(r io.Reader) {
	defer close(e.readDone)
	lines := ndjson.NewReader(r, 0)
	for {
		line, err := lines.Next()
		if err != nil {
			var tooLong *ndjson.TooLongError
			if errors.As(err, &tooLong) {
				e.log.Warn("skipping an overlong line from the bridge", "error", err)
				continue
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				e.log.Warn("reading from the bridge failed", "error", err)
			}
			return
		}
		e.p.rawLine("← ", line)
		e.handle(line)
	}
}

// handle dispatches one line from the bridge.
func (e *editor) handle(line []byte) {
	env, perr := translate.ParseEnvelope(line)
	if perr != nil {
		e.log.Warn("unusable line from the bridge", "error", perr)
		return
	}
	switch {
	case env.IsResponse():
		id, err := strconv.Atoi(string(env.ID))
		if err != nil {
			e.log.Warn("answer with an id the editor never used", "id", string(env.ID))
			return
		}
		e.mu.Lock()
		ch := e.pending[id]
		delete(e.pending, id)
		e.mu.Unlock()
		if ch == nil {
			e.log.Warn("answer with an id the editor never used", "id", id)
			return
		}
		ch <- rpcAnswer{result: clone(env.Result), err: clone(env.Error)}
	case env.IsNotification():
		if env.Method == "session/update" {
			e.update(env.Params)
		}
	case env.IsRequest():
		e.request(&env)
	}
}

// request answers one request from the bridge.
func (e *editor) request(env *translate.Envelope) {
	id := clone(env.ID)
	switch env.Method {
	case "session/request_permission":
		params := gjson.ParseBytes(env.Params)
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
		result, _ := json.Marshal(map[string]any{"outcome": outcome})
		e.send(translate.ResultFrame(id, result))
	case "fs/read_text_file", "fs/write_text_file":
		// Advertised so that the bridge does not fall back to the disk,
		// but the demo agent never asks.
		e.send(translate.ErrorFrame(id, translate.Errorf(translate.CodeInternalError, "the demo editor does not serve files").JSON()))
	default:
		e.send(translate.ErrorFrame(id, translate.Errorf(translate.CodeMethodNotFound, "the demo editor does not implement %q", env.Method).JSON()))
	}
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
			status = "pending" // the default (acp-spec.md §9.1)
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
}

// labelWidth aligns the readable view's text after its labels.
const labelWidth = 7

func (p *printer) write(s string) {
	if p.err != nil {
		return
	}
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
		p.write("# acp-bridge demo --raw: scripted ACP v1 editor ⇄ acp-bridge (dialect " + dialect + ") ⇄ built-in Zed ACP 0.0.x agent on " + url + "\n")
		p.write("# \"→ \" editor to bridge and \"← \" bridge to editor: ACP v1, one JSON-RPC message per line\n")
		p.write("# \"→agent \" bridge to agent and \"agent→ \" agent to bridge: legacy 0.0.x WebSocket frames\n")
		return
	}
	p.write("acp-bridge demo: a scripted ACP v1 editor talks to a built-in legacy agent through the real bridge.\n\n")
	p.write("  scripted editor (ACP v1)  ⇄  acp-bridge, dialect " + dialect + "  ⇄  Zed ACP 0.0.x agent on " + url + "\n\n")
}

func (p *printer) footer() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLine()
	if p.raw {
		p.write("# done: every editor request was answered and the bridge shut down cleanly\n")
		return
	}
	p.write("\nDone: the real bridge engine translated ACP v1 to Zed ACP 0.0.x and back over a real WebSocket;\n")
	p.write("every editor request was answered and the bridge shut down cleanly.\n")
	p.write("Run `acp-bridge demo --raw` to see each ACP line and the legacy frames they were translated to and from.\n")
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
