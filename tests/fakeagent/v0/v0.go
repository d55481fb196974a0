// Package v0 is a scripted legacy agent for acp-bridge's end-to-end tests of
// the acp-v0 dialect. It speaks the original Zed ACP 0.0.x exactly as Gemini
// CLI 0.1.16 does with --experimental-acp (docs/agent-protocols.md#acp-v0), byte
// for byte wherever the captured frames pin the bytes:
//
//   - every message is a request with an id; the agent numbers its own
//     requests from 0 and answers void methods with "result":null;
//   - over stdio it prints the plain line "Data collection is disabled." on
//     stdout before its initialize answer (Banner);
//   - a cancelled turn ends with an Internal error ("This operation was
//     aborted") on the pending sendUserMessage, and cancelSendMessage while
//     idle fails with "Not currently generating";
//   - it never sends a closing updateToolCall for a rejected confirmation.
//
// Each connection is one conversation, as each Gemini process is. What the
// agent does in a turn is scripted by the text of the prompt's chunks (see
// (*agent).script). Everything the agent receives and sends, and every rule
// of the legacy protocol the bridge broke, is appended to a journal file
// (Config.JournalDir) that the tests read back with ReadJournals: the legacy
// protocol has no extension methods to ask the agent over the wire.
//
// The package is served as a child process (RunStdio, configured by
// environment variables because the bridge starts it) and behind a WebSocket
// (ServeFunc with fakeagent.WSServer).
package v0

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// Environment variables read by RunStdio.
const (
	// EnvJournal names the directory journals are written to.
	EnvJournal = "FAKE_V0_JOURNAL"
	// EnvUnauthenticated, when "1", makes initialize answer
	// isAuthenticated false.
	EnvUnauthenticated = "FAKE_V0_UNAUTHENTICATED"
)

// ProtocolVersion is the version Gemini CLI 0.1.x answers in initialize
// (docs/agent-protocols.md#acp-v0).
const ProtocolVersion = "0.0.9"

// Banner is the non-JSON line Gemini CLI 0.1.x prints on stdout before its
// initialize answer (docs/agent-protocols.md#acp-v0-framing).
const Banner = "Data collection is disabled."

// Frames and texts the scripts use, named so tests can compare exactly.
const (
	// ToolOutput is the markdown of the finished echo tool.
	ToolOutput = "hi-from-tool\n"
	// ConfirmParams are the params of the captured requestToolCallConfirmation.
	ConfirmParams = `{"label":"echo hi-from-tool (say hi)","icon":"terminal","content":null,"confirmation":{"type":"execute","rootCommand":"echo","command":"echo hi-from-tool"},"locations":[]}`
	// RejectedText is the text chunk after a refused confirmation.
	RejectedText = "The command was not run."
	// AbortedError is the error of a sendUserMessage ended by
	// cancelSendMessage (captured).
	AbortedError = `{"code":-32603,"message":"Internal error","data":{"details":"This operation was aborted"}}`
	// IdleCancelError is the answer to cancelSendMessage with no turn
	// running (captured).
	IdleCancelError = `{"code":-32603,"message":"Internal error","data":{"details":"Not currently generating"}}`
	// PreInitError is what the agent answers a request that arrives before
	// its initialize answer went out, besides recording a violation: the
	// bridge must wait for that answer, as every client of an SDK-built
	// agent must. Gemini CLI 0.1.x was not captured doing this; the shape
	// is the one its Connection gives every error a handler throws
	// (docs/agent-protocols.md#acp-v0-framing), with "%s" the method.
	PreInitError = `{"code":-32603,"message":"Internal error","data":{"details":"The connection must be initialized before '%s'"}}`
	// RateLimitError is Gemini's mapping of HTTP 429
	// (docs/agent-protocols.md#acp-v0-framing).
	RateLimitError = `{"code":429,"message":"Rate limit exceeded. Try again later."}`
	// PlanEntries are the entries of the "plan" script's updatePlan.
	PlanEntries = `[{"content":"Read the code","priority":"high","status":"completed"},{"content":"Write the fix","priority":"medium","status":"in_progress"},{"content":"Run the tests","priority":"low","status":"pending"}]`
	// WrittenPrefix starts what the "fs" script writes, followed by what it
	// read.
	WrittenPrefix = "written by the fake agent after reading: "
)

// slowLimit bounds the "slow" script when no cancel ever comes.
const slowLimit = 30 * time.Second

// Config configures one agent connection.
type Config struct {
	// JournalDir receives one journal file per connection; "" keeps no
	// journal.
	JournalDir string
	// Unauthenticated makes initialize answer isAuthenticated false.
	Unauthenticated bool
	// Banner prints the Banner line before the initialize answer, as
	// Gemini does on stdout.
	Banner bool
	// Transport names the transport ("stdio", "ws") in the journal.
	Transport string
	// Die ends the agent abruptly (the "crash" script): a child process
	// exits with status 3, a WebSocket agent drops its connection. nil
	// makes Serve return instead.
	Die func()
	// BreakInput, if set, runs before Die in the "crash-now" script: a child
	// closes its stdin and lingers, so that the bridge's next write surely
	// fails (EPIPE) while the exit status is still to come.
	BreakInput func()
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// errDied is returned by Serve when the "crash" script ran without a Die.
var errDied = errors.New("fake v0 agent: crashed on request")

// Serve runs the agent on one connection: frames arrive on in, one per line,
// and leave on out, one whole line per Write. It returns when in reaches EOF
// or fails; a turn still running is abandoned.
func Serve(in io.Reader, out io.Writer, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a := &agent{
		cfg:     cfg,
		out:     out,
		sent:    make(map[int64]string),
		pending: make(map[int64]chan reply),
		died:    make(chan struct{}),
	}
	a.cwd, _ = os.Getwd()
	j, err := openJournal(cfg.JournalDir, cfg.Transport, a.cwd)
	if err != nil {
		return err
	}
	a.j = j
	defer j.close()

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		br := bufio.NewReaderSize(in, 1<<16)
		for {
			line, err := br.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				select {
				case lines <- bytes.TrimRight(line, "\r\n"):
				case <-stop:
					return
				}
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	for {
		select {
		case line := <-lines:
			a.receive(line)
		case err := <-readErr:
			a.j.event("eof")
			a.abortTurn()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-a.died:
			a.abortTurn()
			return errDied
		}
	}
}

// ServeFunc adapts Serve to fakeagent.WSServer: each WebSocket connection
// is one agent, journaled to journalDir.
func ServeFunc(journalDir string, unauthenticated bool) fakeagent.ServeFunc {
	return func(in io.Reader, out io.Writer, opt fakeagent.Options) error {
		return Serve(in, out, Config{
			JournalDir:      journalDir,
			Unauthenticated: unauthenticated,
			Transport:       opt.Transport,
			Die:             opt.Die,
			Logger:          opt.Logger,
		})
	}
}

// RunStdio serves the agent on the process's stdin and stdout, configured
// by EnvJournal and EnvUnauthenticated, and returns the exit status.
func RunStdio() int {
	var breaking atomic.Bool
	err := Serve(os.Stdin, os.Stdout, Config{
		JournalDir:      os.Getenv(EnvJournal),
		Unauthenticated: os.Getenv(EnvUnauthenticated) == "1",
		Banner:          true,
		Transport:       "stdio",
		Die:             func() { os.Exit(3) },
		BreakInput: func() {
			breaking.Store(true)
			os.Stdin.Close()
			time.Sleep(200 * time.Millisecond)
		},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if breaking.Load() {
		select {} // closing stdin ended Serve; the crash script exits with 3
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake v0 agent:", err)
		return 1
	}
	return 0
}

// reply is the bridge's answer to one of the agent's requests.
type reply struct {
	result json.RawMessage
	err    json.RawMessage
}

// turn is the running sendUserMessage.
type turn struct {
	id     json.RawMessage // raw id of the sendUserMessage
	ctx    context.Context
	cancel context.CancelFunc
}

type agent struct {
	cfg Config
	cwd string
	j   *journal

	wmu sync.Mutex // serialises whole-line writes to out
	out io.Writer

	mu          sync.Mutex
	nextID      int64                // the agent's next request id
	sent        map[int64]string     // unanswered request id → method
	pending     map[int64]chan reply // requests a script waits on
	nextBridgeN int64                // the id the bridge's next request must carry
	initSeen    bool                 // initialize arrived
	initialized bool                 // its answer has gone out (or is going)
	turn        *turn
	died        chan struct{}
	dieOnce     sync.Once
}

// send writes one line.
func (a *agent) send(line string) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.j.sent(line)
	if _, err := io.WriteString(a.out, line+"\n"); err != nil {
		a.cfg.Logger.Warn("write failed", "err", err)
	}
}

func (a *agent) result(id json.RawMessage, result string) {
	a.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`)
}

func (a *agent) fail(id json.RawMessage, errObj string) {
	a.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":` + errObj + `}`)
}

// violation records a broken rule of the legacy protocol.
func (a *agent) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	a.cfg.Logger.Error("protocol violation", "what", msg)
	a.j.event("violation: " + msg)
}

// receive handles one line from the bridge.
func (a *agent) receive(line []byte) {
	a.j.received(line)
	if err := translate.Valid(line); err != nil {
		a.violation("%v: %.200s", err, line)
		return
	}
	m := gjson.ParseBytes(line)
	if !m.IsObject() {
		a.violation("not a JSON object: %.200s", line)
		return
	}
	if m.Get("jsonrpc").Str != "2.0" {
		a.violation(`no "jsonrpc":"2.0": %.200s`, line)
	}
	id := m.Get("id")
	if method := m.Get("method"); method.Exists() {
		if !id.Exists() {
			// 0.0.x has no notifications (docs/agent-protocols.md#acp-v0-framing).
			a.violation("notification %s: every 0.0.x message is a request", method.Raw)
			return
		}
		a.checkBridgeID(id)
		a.request(method.Str, json.RawMessage(id.Raw), m.Get("params"))
		return
	}
	a.response(id, m)
}

// checkBridgeID enforces numeric ids counting from 0
// (docs/agent-protocols.md#acp-v0-framing).
func (a *agent) checkBridgeID(id gjson.Result) {
	a.mu.Lock()
	want := a.nextBridgeN
	a.nextBridgeN++
	a.mu.Unlock()
	if id.Type != gjson.Number || id.Raw != strconv.FormatInt(want, 10) {
		a.violation("request id %s, want %d (ids count from 0)", id.Raw, want)
	}
}

func (a *agent) request(method string, id json.RawMessage, params gjson.Result) {
	a.mu.Lock()
	initialized, initSeen := a.initialized, a.initSeen
	if method == "initialize" {
		a.initSeen = true
	}
	a.mu.Unlock()
	if method != "initialize" && !initialized {
		// Gemini turns what its handlers throw into an Internal error;
		// PreInitError is that shape (see its comment).
		a.violation("%s before initialize was answered", method)
		a.fail(id, fmt.Sprintf(PreInitError, method))
		return
	}
	switch method {
	case "initialize":
		if initSeen {
			a.violation("second initialize")
		}
		if v := params.Get("protocolVersion"); v.Type != gjson.String {
			a.violation("initialize protocolVersion %s is not a string", v.Raw)
		}
		// Answered after fakeagent.InitDelay, off the read loop, so that
		// a request sent right behind initialize arrives while it is
		// still unanswered; the flag is set before the answer goes out.
		go func() {
			time.Sleep(fakeagent.InitDelay)
			a.mu.Lock()
			a.initialized = true
			a.mu.Unlock()
			if a.cfg.Banner {
				a.send(Banner)
			}
			a.result(id, fmt.Sprintf(`{"protocolVersion":%q,"isAuthenticated":%t}`, ProtocolVersion, !a.cfg.Unauthenticated))
		}()
	case "authenticate":
		if params.Exists() {
			a.violation("authenticate with params %s (0.0.x sends none)", params.Raw)
		}
		a.j.event("authenticated")
		a.result(id, "null")
	case "sendUserMessage":
		a.startTurn(id, params)
	case "cancelSendMessage":
		if params.Exists() {
			a.violation("cancelSendMessage with params %s (0.0.x sends none)", params.Raw)
		}
		a.mu.Lock()
		t := a.turn
		a.turn = nil
		a.mu.Unlock()
		if t == nil {
			a.j.event("cancel while idle")
			a.fail(id, IdleCancelError)
			return
		}
		a.j.event("cancel")
		// Captured order: the cancel's null first, then the turn's error.
		a.result(id, "null")
		t.cancel()
	default:
		a.violation("unknown method %q", method)
		a.fail(id, fmt.Sprintf(`{"code":-32601,"message":"Method not found","data":{"method":%q}}`, method))
	}
}

func (a *agent) response(id gjson.Result, m gjson.Result) {
	n, err := strconv.ParseInt(id.Raw, 10, 64)
	a.mu.Lock()
	method, known := a.sent[n]
	ch := a.pending[n]
	delete(a.sent, n)
	delete(a.pending, n)
	a.mu.Unlock()
	if err != nil || !known {
		a.violation("response with id %s, which the agent never sent or which was answered already", id.Raw)
		return
	}
	r := reply{}
	switch {
	case m.Get("error").Exists():
		r.err = json.RawMessage(m.Get("error").Raw)
	case m.Get("result").Exists():
		r.result = json.RawMessage(m.Get("result").Raw)
	default:
		a.violation("response to %s %d has neither result nor error", method, n)
		r.err = json.RawMessage(`{"code":-32603,"message":"no result"}`)
	}
	if ch != nil {
		ch <- r
	}
}

// request sends a request and returns its channel for the answer; wait
// false sends fire-and-forget, as Gemini does for chunks.
func (a *agent) call(method, params string, wait bool) chan reply {
	a.mu.Lock()
	id := a.nextID
	a.nextID++
	a.sent[id] = method
	var ch chan reply
	if wait {
		ch = make(chan reply, 1)
		a.pending[id] = ch
	}
	a.mu.Unlock()
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	return ch
}

// errAborted ends a script when its turn was cancelled.
var errAborted = errors.New("aborted")

// await sends a request and waits for the answer or the end of the turn.
func (t *turn) await(a *agent, method, params string) (reply, error) {
	ch := a.call(method, params, true)
	select {
	case r := <-ch:
		return r, nil
	case <-t.ctx.Done():
		return reply{}, errAborted
	}
}

func (t *turn) chunk(a *agent, kind, text string) error {
	if t.ctx.Err() != nil {
		return errAborted
	}
	a.call("streamAssistantMessageChunk", `{"chunk":{"`+kind+`":`+jsonString(text)+`}}`, false)
	return nil
}

func (t *turn) text(a *agent, s string) error    { return t.chunk(a, "text", s) }
func (t *turn) thought(a *agent, s string) error { return t.chunk(a, "thought", s) }

// sleep waits d or until the turn ends.
func (t *turn) sleep(d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-t.ctx.Done():
		return errAborted
	}
}

// turnError is a script's failure answered as the sendUserMessage error.
type turnError string

func (e turnError) Error() string { return string(e) }

func (a *agent) startTurn(id json.RawMessage, params gjson.Result) {
	chunks := params.Get("chunks")
	if !chunks.IsArray() {
		a.violation("sendUserMessage without chunks: %s", params.Raw)
	}
	var texts []string
	var paths []string
	for _, c := range chunks.Array() {
		switch {
		case c.Get("text").Type == gjson.String:
			texts = append(texts, c.Get("text").Str)
		case c.Get("path").Type == gjson.String:
			paths = append(paths, c.Get("path").Str)
		default:
			a.violation("chunk %s is neither {text} nor {path}", c.Raw)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &turn{id: append(json.RawMessage(nil), id...), ctx: ctx, cancel: cancel}
	a.mu.Lock()
	prev := a.turn
	a.turn = t
	a.mu.Unlock()
	if prev != nil {
		// Gemini silently aborts the running turn
		// (docs/agent-protocols.md#acp-v0-captured-session).
		a.violation("sendUserMessage while a turn runs")
		prev.cancel()
	}
	go func() {
		err := a.script(t, strings.TrimSpace(strings.Join(texts, "")), paths)
		a.mu.Lock()
		if a.turn == t {
			a.turn = nil
		}
		a.mu.Unlock()
		var te turnError
		switch {
		case t.ctx.Err() != nil:
			a.fail(t.id, AbortedError)
		case errors.As(err, &te):
			a.fail(t.id, string(te))
		case err != nil:
			a.fail(t.id, fmt.Sprintf(`{"code":-32603,"message":"Internal error","data":{"details":%s}}`, jsonString(err.Error())))
		default:
			a.result(t.id, "null")
		}
		cancel()
	}()
}

// abortTurn ends the running turn without an answer worth reading (stdin is
// gone).
func (a *agent) abortTurn() {
	a.mu.Lock()
	t := a.turn
	a.turn = nil
	a.mu.Unlock()
	if t != nil {
		t.cancel()
	}
}

// script runs one turn. The prompt text (all text chunks joined, trimmed)
// picks what happens:
//
//	any {path} chunk   the captured @path flow: pushToolCall fileSearch,
//	                   updateToolCall finished with what the agent read from
//	                   disk itself, a text chunk quoting it
//	"run echo please"  the captured approval flow (docs/agent-protocols.md#acp-v0-captured-session)
//	"seam"             the seam matrix's turn (seam_matrix_e2e_test.go):
//	                   text "seam-before", requestToolCallConfirmation;
//	                   allowed: updateToolCall finished and text
//	                   "seam-after", otherwise text "seam-refused"
//	"plan"             updatePlan with PlanEntries
//	"fs [R [W]]"       readTextFile {path: R} (default notes.txt), then
//	                   writeTextFile {path: W} (default out.txt) with
//	                   WrittenPrefix + what was read; reports both results
//	                   as text chunks
//	"slow"             a text chunk every 50 ms until cancelled
//	"stream N"         N text chunks "<cwd base>#i " 20 ms apart
//	"429"              the rate-limit error
//	"crash"            one text chunk, its answer awaited, then Die
//	"crash-now"        one text chunk, not awaited, then Die at once
//	anything else      thought "Let me check", text "You said: ", text PROMPT
func (a *agent) script(t *turn, text string, paths []string) error {
	// The history primer acp-bridge puts before a re-attached session's
	// first prompt is context, not the script.
	if _, after, ok := strings.Cut(text, "[end of the earlier transcript]"); ok && strings.HasPrefix(text, "[acp-bridge]") {
		text = strings.TrimSpace(after)
	}
	if len(paths) > 0 {
		return a.pathFlow(t, paths)
	}
	fields := strings.Fields(text)
	cmd := ""
	if len(fields) > 0 {
		cmd = fields[0]
	}
	switch {
	case text == "run echo please":
		return a.approvalFlow(t)
	case text == "seam":
		return a.seamFlow(t)
	case text == "plan":
		if _, err := t.await(a, "updatePlan", `{"entries":`+PlanEntries+`}`); err != nil {
			return err
		}
		return t.text(a, "Plan made.")
	case cmd == "fs":
		read, write := "notes.txt", "out.txt"
		if len(fields) > 1 {
			read = fields[1]
		}
		if len(fields) > 2 {
			write = fields[2]
		}
		return a.fsFlow(t, read, write)
	case text == "slow":
		for i := 1; time.Duration(i)*50*time.Millisecond < slowLimit; i++ {
			if err := t.text(a, fmt.Sprintf("tick %d ", i)); err != nil {
				return err
			}
			if err := t.sleep(50 * time.Millisecond); err != nil {
				return err
			}
		}
		return t.text(a, "never cancelled")
	case cmd == "stream" && len(fields) == 2:
		n, err := strconv.Atoi(fields[1])
		if err != nil {
			return turnError(`{"code":-32602,"message":"stream N: N is not a number"}`)
		}
		for i := 1; i <= n; i++ {
			if err := t.text(a, fmt.Sprintf("%s#%d ", filepath.Base(a.cwd), i)); err != nil {
				return err
			}
			if err := t.sleep(20 * time.Millisecond); err != nil {
				return err
			}
		}
		return nil
	case text == "429":
		return turnError(RateLimitError)
	case text == "crash":
		// The chunk's answer is awaited (Gemini would not) so that the
		// bridge has nothing left to write when the agent dies: the exit
		// status, not a write error, must be what the bridge sees.
		if _, err := t.await(a, "streamAssistantMessageChunk", `{"chunk":{"text":"about to crash"}}`); err != nil {
			return err
		}
		return a.die(t)
	case text == "crash-now":
		// Gemini-like: the chunk is not awaited, so the bridge's answer
		// to it may meet a dead process (EPIPE) before the exit is seen.
		if err := t.text(a, "about to crash"); err != nil {
			return err
		}
		if a.cfg.BreakInput != nil {
			a.cfg.BreakInput()
		}
		return a.die(t)
	}
	if err := t.thought(a, "Let me check"); err != nil {
		return err
	}
	if err := t.text(a, "You said: "); err != nil {
		return err
	}
	return t.text(a, text)
}

// die ends the agent with Config.Die, or makes Serve return without one.
func (a *agent) die(t *turn) error {
	a.j.event("crash")
	if a.cfg.Die != nil {
		a.cfg.Die()
	}
	a.dieOnce.Do(func() { close(a.died) })
	<-t.ctx.Done()
	return errAborted
}

// approvalFlow is the captured Gemini CLI 0.1.16 session
// (docs/agent-protocols.md#acp-v0-captured-session).
func (a *agent) approvalFlow(t *turn) error {
	if err := t.thought(a, "Let me check"); err != nil {
		return err
	}
	if err := t.text(a, "I will run a command."); err != nil {
		return err
	}
	r, err := t.await(a, "requestToolCallConfirmation", ConfirmParams)
	if err != nil {
		return err
	}
	if r.err != nil {
		a.violation("requestToolCallConfirmation answered with an error: %s", r.err)
		return turnError(string(r.err))
	}
	res := gjson.ParseBytes(r.result)
	toolID := res.Get("id")
	outcome := res.Get("outcome").Str
	if toolID.Type != gjson.Number || toolID.Int() < 1 || toolID.Raw != strconv.FormatInt(toolID.Int(), 10) {
		// Gemini drops the failure update of id 0 (docs/agent-protocols.md#acp-v0-behaviour).
		a.violation("confirmation tool id %s is not an integer ≥ 1", toolID.Raw)
	}
	a.j.event("outcome " + outcome)
	switch outcome {
	case "allow", "alwaysAllow", "alwaysAllowMcpServer", "alwaysAllowTool":
		update := fmt.Sprintf(`{"toolCallId":%s,"status":"finished","content":{"type":"markdown","markdown":%s}}`, toolID.Raw, jsonString(ToolOutput))
		if _, err := t.await(a, "updateToolCall", update); err != nil {
			return err
		}
		if err := t.thought(a, "Thinking about result"); err != nil {
			return err
		}
		return t.text(a, "Done.")
	case "reject", "cancel":
		// No updateToolCall for a refused tool: Gemini just tells the
		// model (captured).
		return t.text(a, RejectedText)
	}
	a.violation("unknown confirmation outcome %q", outcome)
	return t.text(a, RejectedText)
}

// seamFlow is the seam matrix's turn: approvalFlow's shape with the texts
// every fake of the matrix says.
func (a *agent) seamFlow(t *turn) error {
	if err := t.text(a, "seam-before"); err != nil {
		return err
	}
	r, err := t.await(a, "requestToolCallConfirmation", ConfirmParams)
	if err != nil {
		return err
	}
	if r.err != nil {
		a.violation("requestToolCallConfirmation answered with an error: %s", r.err)
		return turnError(string(r.err))
	}
	res := gjson.ParseBytes(r.result)
	if res.Get("outcome").Str != "allow" {
		return t.text(a, "seam-refused")
	}
	update := fmt.Sprintf(`{"toolCallId":%s,"status":"finished","content":null}`, res.Get("id").Raw)
	if _, err := t.await(a, "updateToolCall", update); err != nil {
		return err
	}
	return t.text(a, "seam-after")
}

// pathFlow is Gemini's @path handling (captured): it reads the files itself
// and announces it with pushToolCall, no permission asked.
func (a *agent) pathFlow(t *turn, paths []string) error {
	for _, p := range paths {
		a.j.event("path " + p)
		r, err := t.await(a, "pushToolCall", `{"icon":"fileSearch","label":`+jsonString("Will attempt to read and concatenate files using patterns: `"+p+"` …")+`}`)
		if err != nil {
			return err
		}
		toolID := gjson.GetBytes(r.result, "id")
		if r.err != nil || toolID.Type != gjson.Number || toolID.Int() < 1 {
			a.violation("pushToolCall answered %s %s, want {id: N ≥ 1}", r.result, r.err)
			return turnError(`{"code":-32603,"message":"Internal error","data":{"details":"bad pushToolCall answer"}}`)
		}
		full := p
		if !filepath.IsAbs(full) {
			full = filepath.Join(a.cwd, p)
		}
		data, rerr := os.ReadFile(full)
		body := string(data)
		if rerr != nil {
			body = "error: " + rerr.Error()
		}
		md := "### ReadManyFiles Result (Target Dir: `" + a.cwd + "`)\n\n--- " + p + " ---\n" + body
		if _, err := t.await(a, "updateToolCall", fmt.Sprintf(`{"toolCallId":%s,"status":"finished","content":{"type":"markdown","markdown":%s}}`, toolID.Raw, jsonString(md))); err != nil {
			return err
		}
		if err := t.text(a, "The file says: "+body); err != nil {
			return err
		}
	}
	return nil
}

// fsFlow asks the editor side for a file and writes another: the upstream
// 0.0.x client methods Gemini itself never used
// (docs/agent-protocols.md#acp-v0-methods).
func (a *agent) fsFlow(t *turn, read, write string) error {
	r, err := t.await(a, "readTextFile", `{"path":`+jsonString(read)+`}`)
	if err != nil {
		return err
	}
	content := ""
	if r.err != nil {
		e := gjson.ParseBytes(r.err)
		if err := t.text(a, fmt.Sprintf("read %s failed: %d %s", read, e.Get("code").Int(), e.Get("message").Str)); err != nil {
			return err
		}
	} else {
		c := gjson.GetBytes(r.result, "content")
		if c.Type != gjson.String {
			a.violation("readTextFile result %s has no string content", r.result)
		}
		content = c.Str
		if err := t.text(a, fmt.Sprintf("read %s: %s", read, content)); err != nil {
			return err
		}
	}
	w, err := t.await(a, "writeTextFile", `{"path":`+jsonString(write)+`,"content":`+jsonString(WrittenPrefix+content)+`}`)
	if err != nil {
		return err
	}
	if w.err != nil {
		e := gjson.ParseBytes(w.err)
		return t.text(a, fmt.Sprintf("write %s failed: %d %s", write, e.Get("code").Int(), e.Get("message").Str))
	}
	if string(w.result) != "null" {
		a.violation("writeTextFile result %s, want null", w.result)
	}
	return t.text(a, "wrote "+write)
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
