// Package fakeagent is a scripted ACP v1 agent for acp-bridge's end-to-end
// tests. The same agent is served two ways: as a child process on stdio (the
// test binary re-executes itself, see RunStdio) and behind a WebSocket
// (WSServer), so every scenario can run over both of the bridge's transports
// with the same assertions.
//
// The agent is acp-go-sdk's AgentSideConnection behind a small frame router.
// The router records every frame the agent receives (a journal the tests read
// back through the _test/journal extension method) and answers a few frames
// itself with hand-written bytes, where the tests need byte control that a
// typed SDK would destroy (typed layers drop unknown fields): initialize
// (unknown fields and _meta), _test/echo, session/prompt "_meta" (unknown
// fields both ways) and prompts carrying an image block (payloads beyond the
// SDK's 10 MiB line cap). It also answers _test/journal, _test/info (pid,
// transport) and _test/release {"key":K} (lets a "hold K" prompt finish).
//
// The agent is as strict about the handshake as every agent built on the
// official TypeScript SDK (@agentclientprotocol/sdk 2.4.0): until its
// initialize answer has gone out, a request other than initialize is
// refused with PreInitError and a notification is dropped (logged, and
// journalled as "dropped-before-initialize:METHOD"). It takes InitDelay to
// answer initialize, as a real agent does some work first, so that a
// client sending its next request without waiting for the answer is caught
// every time, not only when it loses a race.
//
// Everything else is scripted by the prompt's first text block; see
// (*agent).Prompt for the commands.
package fakeagent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/tidwall/gjson"
)

// Name is the agentInfo.name the fake agent reports in its initialize answer.
const Name = "fake-agent"

// Options tell Serve how to end a connection when a script asks it to.
type Options struct {
	// Transport names the transport ("stdio", "ws") for _test/info.
	Transport string
	// Die ends the agent abruptly in the middle of a turn: a child process
	// exits with status 3, a WebSocket agent drops its TCP connection
	// without a close frame. Die need not return.
	Die func()
	// Close ends the agent politely in the middle of a turn: a child process
	// exits with status 0, a WebSocket agent sends a close frame first.
	Close func()
	// Logger receives the SDK's diagnostics; nil discards them.
	Logger *slog.Logger
	// OnInitialize, when set, runs when initialize arrives, before the
	// agent answers it; RunStdio uses it for EnvInitExit.
	OnInitialize func()
	// LoadSession makes the agent advertise loadSession and answer
	// session/load of any id: it journals "load:ID", replays one chunk
	// "replayed-by-agent ID" and succeeds.
	LoadSession bool
	// LoadKnownOnly, with LoadSession, answers session/load of an id this
	// agent process did not create with -32002 (resource not found), as
	// an agent that keeps its sessions in memory does after a restart.
	LoadKnownOnly bool
}

// EnvLoadSession, set in a child fake agent's environment, turns on
// Options.LoadSession; set to "known", Options.LoadKnownOnly too.
const EnvLoadSession = "FAKE_AGENT_LOAD_SESSION"

// EnvInitExit, in a child fake agent's environment, makes it fail at
// initialize the way an agent without credentials does: set to
// "STATUS:TEXT", the agent prints TEXT on stderr when initialize arrives
// and exits with STATUS without answering (e.g. "3:error: FAKE_API_KEY not
// set").
const EnvInitExit = "FAKE_AGENT_INIT_EXIT"

// InitDelay is how long the agent works on initialize before answering it.
// A client that waits for the answer never notices; one that does not has
// its next requests refused, deterministically.
const InitDelay = 50 * time.Millisecond

// PreInitError is the error object the TypeScript SDK's agents answer a
// request other than initialize with before initialize has been answered
// (dist/v1/stable/acp.js, agentInitializationGate, in
// @agentclientprotocol/sdk 2.4.0: RequestError.invalidRequest with the
// message "ACP connection must be initialized before '<method>'").
func PreInitError(method string) []byte {
	b, _ := json.Marshal(map[string]any{"code": -32600, "message": "Invalid request: ACP connection must be initialized before '" + method + "'"})
	return b
}

// sdkLineCap is kept below acp-go-sdk's 10 MiB bufio.Scanner limit: a longer
// frame handed to the SDK would kill its connection.
const sdkLineCap = 8 << 20

// journalCap bounds how much of one received frame the journal keeps
// verbatim; longer frames are summarised by length and SHA-256.
const journalCap = 64 << 10

// Serve runs the agent on one connection: frames arrive on in, one JSON-RPC
// message per line, and leave on out, one message per Write call ending in
// "\n". It returns when in reaches EOF or fails.
func Serve(in io.Reader, out io.Writer, opt Options) error {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opt.Die == nil {
		opt.Die = func() {}
	}
	if opt.Close == nil {
		opt.Close = opt.Die
	}
	w := &lineWriter{w: out}
	toSDK, fromRouter := io.Pipe()
	a := &agent{opt: opt, out: w}
	a.conn = acp.NewAgentSideConnection(a, w, toSDK)
	a.conn.SetLogger(opt.Logger)

	br := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			frame := bytes.TrimRight(line, "\r\n")
			a.journal.received(frame)
			if !a.initialized.Load() && !a.admitBeforeInit(frame) {
				continue
			}
			if !a.route(frame) {
				if _, werr := fromRouter.Write(append(frame, '\n')); werr != nil {
					return werr
				}
			}
		}
		if err != nil {
			fromRouter.Close()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// lineWriter serialises whole messages from the SDK and the router onto one
// sink; every Write call is one complete line.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lineWriter) send(frame []byte) {
	_, _ = l.Write(append(frame, '\n'))
}

// journal is what the agent saw: every received frame and the scripted
// events it went through.
type journal struct {
	mu     sync.Mutex
	frames []string
	events []string
}

func (j *journal) received(frame []byte) {
	s := string(frame)
	if len(frame) > journalCap {
		sum := sha256.Sum256(frame)
		s = fmt.Sprintf("<%d bytes sha256 %x>", len(frame), sum)
	}
	j.mu.Lock()
	j.frames = append(j.frames, s)
	j.mu.Unlock()
}

func (j *journal) event(format string, args ...any) {
	j.mu.Lock()
	j.events = append(j.events, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

// sawMethod reports whether a received frame had method m.
func (j *journal) sawMethod(m string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, f := range j.frames {
		if gjson.Get(f, "method").Str == m {
			return true
		}
	}
	return false
}

// Journal is the result of the _test/journal extension method.
type Journal struct {
	// Frames are the frames the agent received, oldest first, verbatim
	// (or "<N bytes sha256 H>" for frames over 64 KiB).
	Frames []string `json:"frames"`
	// Events are scripted milestones such as "cancel:sess-1" or
	// "late-sent:sess-1".
	Events []string `json:"events"`
}

func (j *journal) snapshot() Journal {
	j.mu.Lock()
	defer j.mu.Unlock()
	return Journal{
		Frames: append([]string{}, j.frames...),
		Events: append([]string{}, j.events...),
	}
}

// Info is the result of the _test/info extension method.
type Info struct {
	PID       int    `json:"pid"`
	Transport string `json:"transport"`
}

// ImageDigest is what the agent reports, in the prompt response's
// _meta["fake-agent"], for a prompt whose first block is an image.
type ImageDigest struct {
	ParamsBytes  int    `json:"paramsBytes"`
	ParamsSHA256 string `json:"paramsSha256"`
	ImageBytes   int    `json:"imageBytes"`
	ImageSHA256  string `json:"imageSha256"`
}

// MetaUpdateParams is the session/update params the agent sends, byte for
// byte, for the "_meta" prompt. sessionID is the raw JSON session id.
// Besides _meta it carries unknown fields at three depths and numbers whose
// spelling a decode/encode round trip would change.
func MetaUpdateParams(sessionID []byte) []byte {
	return fmt.Appendf(nil, `{"sessionId":%s,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"meta-echo","_meta":{"k":"v","n":1.50}},"unknownUpdateField":{"a":[1,2,3]}},"_meta":{"trace":"t-1","big":12345678901234567890},"unknownTopField":true}`, sessionID)
}

// MetaResult is the session/prompt result the agent sends, byte for byte,
// for the "_meta" prompt: it embeds the params exactly as the agent received
// them, so a test can compare them with what the editor wrote.
func MetaResult(params []byte) []byte {
	return fmt.Appendf(nil, `{"stopReason":"end_turn","_meta":{"echo":%s},"unknownResultField":[1.0,"x",{"deep":null}]}`, params)
}

// InitializeResult is the initialize result the agent sends, byte for byte,
// when the editor asked for protocolVersion version (raw JSON).
func InitializeResult(version []byte, transport string) []byte {
	return fmt.Appendf(nil, `{"protocolVersion":%s,"agentCapabilities":{"loadSession":false,"promptCapabilities":{"image":true,"audio":false,"embeddedContext":true},"mcpCapabilities":{"http":false,"sse":false},"_meta":{"fake.dev/caps":{"x":1}}},"authMethods":[],"agentInfo":{"name":%q,"version":"0.0.1"},"_meta":{"fake-agent":{"pid":%d,"transport":%q}},"unknownInitField":{"keep":[1,2.50,"three"]}}`,
		version, Name, os.Getpid(), transport)
}

type agent struct {
	opt     Options
	out     *lineWriter
	conn    *acp.AgentSideConnection
	journal journal

	// initialized is set once an initialize answer is about to go out;
	// until then only initialize is served (see admitBeforeInit).
	initialized atomic.Bool

	mu       sync.Mutex
	sessions int
	made     map[string]bool          // the ids of the sessions NewSession created
	gates    map[string]chan struct{} // "hold K" waits on gates[K]; _test/release closes it
}

// created reports whether NewSession created session sid.
func (a *agent) created(sid string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.made[sid]
}

// gate returns the channel of key, made on first use by either side.
func (a *agent) gate(key string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gates == nil {
		a.gates = make(map[string]chan struct{})
	}
	g, ok := a.gates[key]
	if !ok {
		g = make(chan struct{})
		a.gates[key] = g
	}
	return g
}

// release opens key's gate; releasing twice is harmless.
func (a *agent) release(key string) {
	g := a.gate(key)
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-g:
	default:
		close(g)
	}
}

// admitBeforeInit decides the fate of a frame that arrives before
// initialize has been answered, as the TypeScript SDK's gate does: it
// reports true for initialize itself and for anything that is not a
// request or a notification (a response, or garbage for the SDK to reject);
// it answers any other request with PreInitError and drops any other
// notification, reporting false.
func (a *agent) admitBeforeInit(frame []byte) bool {
	method := gjson.GetBytes(frame, "method")
	if method.Type != gjson.String || method.Str == "initialize" {
		return true
	}
	id := gjson.GetBytes(frame, "id")
	if !id.Exists() {
		a.journal.event("dropped-before-initialize:%s", method.Str)
		a.opt.Logger.Warn("fake agent: dropped a notification that came before initialize was answered", "method", method.Str)
		return false
	}
	a.journal.event("refused-before-initialize:%s", method.Str)
	a.opt.Logger.Warn("fake agent: refused a request that came before initialize was answered", "method", method.Str)
	a.out.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":%s}`, id.Raw, PreInitError(method.Str)))
	return false
}

// route answers the frames the router handles with its own bytes and
// reports whether it did; the rest go to the SDK.
func (a *agent) route(frame []byte) bool {
	id := gjson.GetBytes(frame, "id")
	method := gjson.GetBytes(frame, "method")
	if !id.Exists() || method.Type != gjson.String {
		if len(frame) > sdkLineCap {
			return true // a notification or response too large for the SDK: journal only
		}
		return false
	}
	params := gjson.GetBytes(frame, "params")
	reply := func(result []byte) {
		a.out.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id.Raw, result))
	}
	switch method.Str {
	case "initialize":
		if a.opt.OnInitialize != nil {
			a.opt.OnInitialize()
		}
		version := []byte("1")
		if v := params.Get("protocolVersion"); v.Type == gjson.Number {
			version = []byte(v.Raw)
		}
		res := InitializeResult(version, a.opt.Transport)
		if a.opt.LoadSession {
			res = bytes.Replace(res, []byte(`"loadSession":false`), []byte(`"loadSession":true`), 1)
		}
		// Answered later, off the read loop, so that frames sent right
		// behind initialize arrive while it is still unanswered. The flag
		// is set before the answer goes out, as the SDK does, so that a
		// client's next request is never refused.
		go func() {
			time.Sleep(InitDelay)
			a.initialized.Store(true)
			reply(res)
		}()
		return true
	case "session/load":
		if !a.opt.LoadSession {
			return false
		}
		sid := params.Get("sessionId").Str
		a.journal.event("load:%s", sid)
		if a.opt.LoadKnownOnly && !a.created(sid) {
			a.out.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32002,"message":"Resource not found","data":{"sessionId":%q}}}`, id.Raw, sid))
			return true
		}
		chunk, _ := json.Marshal(map[string]any{"sessionId": sid, "update": map[string]any{
			"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "replayed-by-agent " + sid}}})
		a.out.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":%s}`, chunk))
		reply([]byte("{}"))
		return true
	case "_test/echo":
		if !params.Exists() {
			reply([]byte("null"))
		} else {
			reply([]byte(params.Raw))
		}
		return true
	case "_test/journal":
		b, _ := json.Marshal(a.journal.snapshot())
		reply(b)
		return true
	case "_test/info":
		b, _ := json.Marshal(Info{PID: os.Getpid(), Transport: a.opt.Transport})
		reply(b)
		return true
	case "_test/release":
		a.release(params.Get("key").Str)
		a.journal.event("release:%s", params.Get("key").Str)
		reply([]byte("{}"))
		return true
	case "session/prompt":
		first := params.Get("prompt.0")
		switch {
		case first.Get("type").Str == "image":
			data := first.Get("data").Str
			ps := sha256.Sum256([]byte(params.Raw))
			is := sha256.Sum256([]byte(data))
			d, _ := json.Marshal(ImageDigest{
				ParamsBytes: len(params.Raw), ParamsSHA256: hex.EncodeToString(ps[:]),
				ImageBytes: len(data), ImageSHA256: hex.EncodeToString(is[:]),
			})
			reply(fmt.Appendf(nil, `{"stopReason":"end_turn","_meta":{"fake-agent":%s}}`, d))
			return true
		case first.Get("type").Str == "text" && first.Get("text").Str == "_meta":
			sid := params.Get("sessionId").Raw
			a.out.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":%s}`, MetaUpdateParams([]byte(sid))))
			reply(MetaResult([]byte(params.Raw)))
			return true
		}
	}
	if len(frame) > sdkLineCap {
		a.out.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"Invalid request","data":{"reason":"fake agent: %d-byte frame is not scripted"}}}`, id.Raw, len(frame)))
		return true
	}
	return false
}

var _ acp.Agent = (*agent)(nil)

func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	// Unreachable: route answers initialize with raw bytes.
	return acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber, AuthMethods: []acp.AuthMethod{}}, nil
}

func (a *agent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	a.mu.Lock()
	a.sessions++
	id := acp.SessionId(fmt.Sprintf("sess-%d", a.sessions))
	if a.made == nil {
		a.made = map[string]bool{}
	}
	a.made[string(id)] = true
	a.mu.Unlock()
	a.journal.event("session:%s:cwd=%s", id, p.Cwd)
	return acp.NewSessionResponse{SessionId: id}, nil
}

func (a *agent) Cancel(ctx context.Context, p acp.CancelNotification) error {
	a.journal.event("cancel:%s", p.SessionId)
	return nil
}

func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, nil
}

func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *agent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *agent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}

// say streams one agent_message_chunk. It ignores ctx on purpose: the SDK
// cancels a prompt's context on session/cancel, and the agent may still send
// updates until it answers (ACP spec, Prompt Turn: cancellation).
func (a *agent) say(sid acp.SessionId, text string) error {
	return a.conn.SessionUpdate(context.Background(), acp.SessionNotification{
		SessionId: sid,
		Update:    acp.UpdateAgentMessageText(text),
	})
}

// Prompt runs the script named by the first word of the prompt's first text
// block:
//
//	stream N       N chunks "chunk-0000"… then end_turn
//	deep N         a frame of N "[" and one "]" (default 6,000,000), then
//	               the chunk "after-deep" and end_turn
//	permission     tool_call, session/request_permission, reports
//	               "permission:selected:<id>" / "permission:cancelled" /
//	               "permission:error:<code>"
//	fs PATH        fs/read_text_file PATH ("fs:read:<content>" or
//	               "fs:read-error:<code>"), then fs/write_text_file
//	               PATH.out = "copied:<content>" ("fs:wrote" or
//	               "fs:write-error:<code>")
//	terminal       terminal/create echo hello, output, wait_for_exit,
//	               release; reports "terminal:<id>:<output>:<exit code>"
//	ext-editor     calls the editor's _test/editor-echo; reports "ext:<result>"
//	wait-cancel    chunks "tick-N" until session/cancel, then the chunk
//	               "cancel-seen" and stopReason cancelled
//	deaf           the chunk "deaf", then nothing: it never answers, a
//	               session/cancel included, until the connection closes
//	ignore-cancel  chunks "tick-N" until session/cancel, then silence for
//	               1 s, then the chunk "late-update" and a late end_turn
//	wait-cancel-request
//	               chunks "tick-N" until cancelled, then waits (up to 2 s)
//	               for a $/cancel_request frame to arrive, reports
//	               "cancel-request-seen" and answers cancelled
//	hold K         the chunk "holding:K", then waits until _test/release
//	               {"key":"K"} arrives (before or after), then the chunk
//	               "released:K" and end_turn; a session/cancel ends it with
//	               stopReason cancelled
//	stop REASON    the chunk "stopping:REASON", then stopReason REASON
//	               (refusal, max_tokens, …)
//	seam           the seam matrix's turn (tests/seam_matrix_e2e_test.go):
//	               the chunk "seam-before", tool call seam-1 (pending),
//	               session/request_permission; allowed once: seam-1
//	               completed and the chunk "seam-after", otherwise seam-1
//	               failed and the chunk "seam-refused"
//	die            two chunks, then Options.Die
//	close          two chunks, then Options.Close
//	anything else  the chunk "echo:<text>" and end_turn
func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	text := ""
	for _, b := range p.Prompt {
		// The history preamble acp-bridge puts before a re-attached
		// session's first prompt is context, not the script.
		if b.Text != nil && !strings.HasPrefix(b.Text.Text, "[acp-bridge]") {
			text = b.Text.Text
			break
		}
	}
	sid := p.SessionId
	a.journal.event("prompt:%s:%s", sid, text)
	words := strings.Fields(text)
	cmd := ""
	if len(words) > 0 {
		cmd = words[0]
	}
	bg := context.WithoutCancel(ctx)
	end := func() (acp.PromptResponse, error) {
		if ctx.Err() != nil {
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	}

	switch cmd {
	case "deep":
		// A hostile frame: N "[" and one "]", shaped like a frame (it
		// passes the transport's framing check) but nested far deeper
		// than any parser should follow. Then a normal chunk and end_turn.
		n := 6_000_000
		if len(words) > 1 {
			if v, err := strconv.Atoi(words[1]); err == nil {
				n = v
			}
		}
		a.out.send(append(bytes.Repeat([]byte("["), n), ']'))
		if err := a.say(sid, "after-deep"); err != nil {
			return acp.PromptResponse{}, err
		}
		return end()
	case "stream":
		n := 10
		if len(words) > 1 {
			if v, err := strconv.Atoi(words[1]); err == nil {
				n = v
			}
		}
		for i := range n {
			if err := a.say(sid, fmt.Sprintf("chunk-%04d", i)); err != nil {
				return acp.PromptResponse{}, err
			}
		}
		return end()

	case "permission":
		_ = a.conn.SessionUpdate(bg, acp.SessionNotification{
			SessionId: sid,
			Update: acp.StartToolCall("perm-1", "Run a dangerous thing",
				acp.WithStartKind(acp.ToolKindExecute), acp.WithStartStatus(acp.ToolCallStatusPending)),
		})
		resp, err := a.conn.RequestPermission(bg, acp.RequestPermissionRequest{
			SessionId: sid,
			ToolCall:  acp.ToolCallUpdate{ToolCallId: "perm-1", Title: acp.Ptr("Run a dangerous thing")},
			Options: []acp.PermissionOption{
				{OptionId: "allow-once", Name: "Allow once", Kind: acp.PermissionOptionKindAllowOnce},
				{OptionId: "reject-once", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
			},
		})
		switch {
		case err != nil:
			_ = a.say(sid, "permission:error:"+errCode(err))
		case resp.Outcome.Selected != nil:
			_ = a.say(sid, "permission:selected:"+string(resp.Outcome.Selected.OptionId))
		case resp.Outcome.Cancelled != nil:
			_ = a.say(sid, "permission:cancelled")
		default:
			_ = a.say(sid, "permission:unknown")
		}
		_ = a.conn.SessionUpdate(bg, acp.SessionNotification{
			SessionId: sid,
			Update:    acp.UpdateToolCall("perm-1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted)),
		})
		return end()

	case "seam":
		_ = a.say(sid, "seam-before")
		_ = a.conn.SessionUpdate(bg, acp.SessionNotification{
			SessionId: sid,
			Update: acp.StartToolCall("seam-1", "Run the seam tool",
				acp.WithStartKind(acp.ToolKindExecute), acp.WithStartStatus(acp.ToolCallStatusPending)),
		})
		resp, err := a.conn.RequestPermission(bg, acp.RequestPermissionRequest{
			SessionId: sid,
			ToolCall:  acp.ToolCallUpdate{ToolCallId: "seam-1", Title: acp.Ptr("Run the seam tool")},
			Options: []acp.PermissionOption{
				{OptionId: "allow-once", Name: "Allow once", Kind: acp.PermissionOptionKindAllowOnce},
				{OptionId: "reject-once", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
			},
		})
		status, text := acp.ToolCallStatusFailed, "seam-refused"
		if err == nil && resp.Outcome.Selected != nil && resp.Outcome.Selected.OptionId == "allow-once" {
			status, text = acp.ToolCallStatusCompleted, "seam-after"
		}
		_ = a.conn.SessionUpdate(bg, acp.SessionNotification{
			SessionId: sid,
			Update:    acp.UpdateToolCall("seam-1", acp.WithUpdateStatus(status)),
		})
		_ = a.say(sid, text)
		return end()

	case "fs":
		path := ""
		if len(words) > 1 {
			path = words[1]
		}
		rd, err := a.conn.ReadTextFile(bg, acp.ReadTextFileRequest{SessionId: sid, Path: path})
		if err != nil {
			_ = a.say(sid, "fs:read-error:"+errCode(err))
			return end()
		}
		_ = a.say(sid, "fs:read:"+rd.Content)
		_, err = a.conn.WriteTextFile(bg, acp.WriteTextFileRequest{SessionId: sid, Path: path + ".out", Content: "copied:" + rd.Content})
		if err != nil {
			_ = a.say(sid, "fs:write-error:"+errCode(err))
			return end()
		}
		_ = a.say(sid, "fs:wrote")
		return end()

	case "terminal":
		ct, err := a.conn.CreateTerminal(bg, acp.CreateTerminalRequest{SessionId: sid, Command: "echo", Args: []string{"hello"}})
		if err != nil {
			_ = a.say(sid, "terminal:create-error:"+errCode(err))
			return end()
		}
		out, err := a.conn.TerminalOutput(bg, acp.TerminalOutputRequest{SessionId: sid, TerminalId: ct.TerminalId})
		if err != nil {
			_ = a.say(sid, "terminal:output-error:"+errCode(err))
			return end()
		}
		ex, err := a.conn.WaitForTerminalExit(bg, acp.WaitForTerminalExitRequest{SessionId: sid, TerminalId: ct.TerminalId})
		if err != nil {
			_ = a.say(sid, "terminal:wait-error:"+errCode(err))
			return end()
		}
		if _, err := a.conn.ReleaseTerminal(bg, acp.ReleaseTerminalRequest{SessionId: sid, TerminalId: ct.TerminalId}); err != nil {
			_ = a.say(sid, "terminal:release-error:"+errCode(err))
			return end()
		}
		code := -1
		if ex.ExitCode != nil {
			code = *ex.ExitCode
		}
		_ = a.say(sid, fmt.Sprintf("terminal:%s:%s:%d", ct.TerminalId, out.Output, code))
		return end()

	case "ext-editor":
		res, err := a.conn.CallExtension(bg, "_test/editor-echo", json.RawMessage(`{"from":"agent","n":[1,2,3]}`))
		if err != nil {
			_ = a.say(sid, "ext-error:"+errCode(err))
			return end()
		}
		_ = a.say(sid, "ext:"+string(res))
		return end()

	case "wait-cancel", "ignore-cancel", "wait-cancel-request":
		for i := 0; ctx.Err() == nil; i++ {
			_ = a.say(sid, fmt.Sprintf("tick-%d", i))
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		a.journal.event("prompt-cancelled:%s", sid)
		switch cmd {
		case "wait-cancel":
			_ = a.say(sid, "cancel-seen")
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		case "wait-cancel-request":
			// The SDK cancels this context on session/cancel and on
			// $/cancel_request alike; an editor (acp-go-sdk) that cancels
			// a Prompt's context sends both, in either order. Wait for the
			// latter so the test can see how the bridge translated it.
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
				if a.journal.sawMethod("$/cancel_request") {
					_ = a.say(sid, "cancel-request-seen")
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		// ignore-cancel: stay silent past the bridge's grace period, then
		// misbehave: an update after the turn ended and a second answer.
		select {
		case <-time.After(time.Second):
		case <-a.conn.Done():
			return acp.PromptResponse{}, errors.New("connection closed")
		}
		_ = a.say(sid, "late-update")
		a.journal.event("late-sent:%s", sid)
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil

	case "hold":
		key := ""
		if len(words) > 1 {
			key = words[1]
		}
		_ = a.say(sid, "holding:"+key)
		a.journal.event("hold:%s:%s", sid, key)
		select {
		case <-a.gate(key):
		case <-ctx.Done():
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		case <-a.conn.Done():
			return acp.PromptResponse{}, errors.New("connection closed")
		}
		_ = a.say(sid, "released:"+key)
		return end()

	case "deaf":
		_ = a.say(sid, "deaf")
		<-a.conn.Done()
		return acp.PromptResponse{}, errors.New("connection closed")

	case "stop":
		reason := ""
		if len(words) > 1 {
			reason = words[1]
		}
		_ = a.say(sid, "stopping:"+reason)
		return acp.PromptResponse{StopReason: acp.StopReason(reason)}, nil

	case "die", "close":
		_ = a.say(sid, "about-to-"+cmd)
		_ = a.say(sid, "last-words")
		a.journal.event("%s:%s", cmd, sid)
		if cmd == "die" {
			a.opt.Die()
		} else {
			a.opt.Close()
		}
		<-a.conn.Done()
		return acp.PromptResponse{}, errors.New("connection closed")
	}

	_ = a.say(sid, "echo:"+text)
	return end()
}

// errCode renders the JSON-RPC code of an SDK error, or "?" for a local one.
func errCode(err error) string {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return strconv.Itoa(re.Code)
	}
	return "?"
}

// RunStdio serves the agent on the process's stdin and stdout until stdin
// reaches EOF, and returns the exit status. Die exits with status 3 and
// Close with status 0, both without answering the turn.
func RunStdio() int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opt := Options{
		Transport: "stdio",
		Die:       func() { os.Exit(3) },
		Close:     func() { os.Stdout.Close(); os.Exit(0) },
		Logger:    logger,
	}
	opt.LoadSession = os.Getenv(EnvLoadSession) != ""
	opt.LoadKnownOnly = os.Getenv(EnvLoadSession) == "known"
	if v, ok := os.LookupEnv(EnvInitExit); ok {
		status, text, _ := strings.Cut(v, ":")
		code, err := strconv.Atoi(status)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fake agent: %s=%q: want STATUS:TEXT\n", EnvInitExit, v)
			return 2
		}
		opt.OnInitialize = func() {
			fmt.Fprintln(os.Stderr, text)
			os.Exit(code)
		}
	}
	err := Serve(os.Stdin, os.Stdout, opt)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake agent:", err)
		return 1
	}
	return 0
}
