// Package flawed is a hand-written ACP v1 agent that breaks the protocol on
// request. It speaks raw JSON-RPC (no SDK), one message per line, so that a
// defect can be any byte on the wire. With no defect switched on it is
// conformant, and `acp-bridge check` passes every scenario against it; each
// defect, switched on alone, is meant to make exactly the scenarios that
// test its rule fail. It exists to test `check`, `compare` and the bridge's
// compliance shims.
//
// Defects are switched on by name, in the environment variable
// FLAWED_DEFECTS="name,name" (RunStdio) or through Serve's Set. The names
// are a contract other tests rely on:
//
//	no-reinit                  a second initialize is answered with an error
//	answer-notifications       every notification is answered with {"id":null,"result":{}}
//	null-id-responses          unsolicited {"id":null,"result":{}} after the initialize answer
//	missing-jsonrpc            "jsonrpc" is omitted from every message
//	result-and-error           the session/prompt response carries both result and error
//	stdout-noise               plain log lines on stdout, before and among the frames
//	string-protocol-version    initialize answers protocolVersion "1" (a string)
//	bad-protocol-version       initialize answers protocolVersion 99
//	snake-case                 session_id, stop_reason, session_update, tool_call_id… in results and updates
//	at-type-updates            updates shaped {"@type":"agent_message_text","text":…} (docs/agent-protocols.md#at-type-updates)
//	canceled-spelling          a cancelled turn ends with stopReason "canceled"
//	end-turn-after-cancel      a cancelled turn ends with stopReason "end_turn"
//	ignore-cancel              a cancelled prompt is never answered
//	late-updates               a session/update after the session/prompt response
//	early-updates              a session/update for a new session before the session/new response
//	dangling-permission        on cancel, ends the turn without waiting for its pending permission request
//	unstable-variants          sends an update variant only the unstable schema has ("subagent_update")
//	unsupported-client-methods calls fs/write_text_file and terminal/create although the client did not advertise them
//	null-results               session/set_mode and authenticate answer a null result
//	wrong-unknown-code         an unknown method is answered -32603 instead of -32601
//	no-parse-error             malformed JSON gets no answer
//	dies-on-garbage            malformed JSON ends the agent
//	concurrent-prompts         a second prompt on a busy session runs alongside the first
//	concurrent-work            a second prompt on a busy session runs alongside the first, its answer held until the first is answered
//	drop-second-prompt         a second prompt on a busy session is never answered
//	preempt-turn               a second prompt on a busy session ends the running turn "cancelled" at once, though the client never cancelled it, and runs
//	interleave-prompts         a second prompt on a busy session starts its work at once (a tool call reading hello.txt, its fs/read_text_file) and finishes after the running turn is answered
//	idless-error-answers       every notification is answered with an error object that has no id
//	relative-paths             fs/read_text_file names a relative path
//	foreign-session            an agent→client request names another session's id
//	schema-violation           an agent_message_chunk whose content is a string
//	unknown-session-ok         a prompt for an unknown session id is served
//	load-without-history       (with session-methods) session/load replays nothing
//	resume-replays-history     (with session-methods) session/resume replays the history
//	close-keeps-serving        (with session-methods) a closed session still serves prompts
//	list-omits-sessions        (with session-methods) session/list answers no session
//
// Quirks are conformant behaviours real agents show that a checker might
// mistake for defects; switched on like defects, they must fail nothing:
//
//	late-session-updates       an available_commands_update right after a cancelled turn's answer (session-level updates may come at any time)
//	session-methods            advertises and serves session/load (replaying the history), session/resume, session/list and session/close
//	auth-required              advertises an agent auth method and refuses session/new with auth_required (-32000) until authenticate
//	queue-prompts              a second prompt on a busy session waits for the running turn's answer, then runs; session/cancel answers the waiting prompts "cancelled" at once, then ends the running turn (as claude-agent-acp)
//	remember-always-allow      offers "Always Allow" first and, as the Claude agents do, remembers that choice per working directory (in a file there): it asks no permission in that directory again; the long script first asks to write story.md
//
// Conformant behaviour: initialize answers protocolVersion 1 with
// agentCapabilities (loadSession false, promptCapabilities) and may be sent
// again; session/new answers sessionId "flawed-N" and two modes; the prompt's
// first text block picks a script:
//
//	contains "permission"  tool_call, session/request_permission, waits for the answer
//	contains "file" or "fs" fs/read_text_file of cwd/hello.txt (when the client advertised it)
//	"wait-cancel"          waits for session/cancel, answers cancelled
//	contains "long"        streams a chunk every 20ms until cancelled (10s at most)
//	anything else          three agent_message_chunk updates, then end_turn
//
// Like every agent built on the TypeScript SDK, it serves nothing but
// initialize until initialize has been answered: another request gets
// fakeagent.PreInitError, another notification is dropped (and logged on
// stderr). It answers initialize after fakeagent.InitDelay, so that a
// client that does not wait for the answer is caught every time.
//
// Unknown methods get -32601, notifications no answer, malformed JSON -32700
// with id null, an invalid request -32600, an unknown session -32602, and a
// second prompt on a busy session -32602. One prompt per session at a time.
package flawed

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// Defect names one way the agent breaks the protocol.
type Defect string

// The defects, documented in the package comment.
const (
	NoReinit                 Defect = "no-reinit"
	AnswerNotifications      Defect = "answer-notifications"
	NullIDResponses          Defect = "null-id-responses"
	MissingJSONRPC           Defect = "missing-jsonrpc"
	ResultAndError           Defect = "result-and-error"
	StdoutNoise              Defect = "stdout-noise"
	StringProtocolVersion    Defect = "string-protocol-version"
	BadProtocolVersion       Defect = "bad-protocol-version"
	SnakeCase                Defect = "snake-case"
	AtTypeUpdates            Defect = "at-type-updates"
	CanceledSpelling         Defect = "canceled-spelling"
	EndTurnAfterCancel       Defect = "end-turn-after-cancel"
	IgnoreCancel             Defect = "ignore-cancel"
	LateUpdates              Defect = "late-updates"
	EarlyUpdates             Defect = "early-updates"
	DanglingPermission       Defect = "dangling-permission"
	UnstableVariants         Defect = "unstable-variants"
	UnsupportedClientMethods Defect = "unsupported-client-methods"
	NullResults              Defect = "null-results"
	WrongUnknownCode         Defect = "wrong-unknown-code"
	NoParseError             Defect = "no-parse-error"
	DiesOnGarbage            Defect = "dies-on-garbage"
	ConcurrentPrompts        Defect = "concurrent-prompts"
	ConcurrentWork           Defect = "concurrent-work"
	DropSecondPrompt         Defect = "drop-second-prompt"
	PreemptTurn              Defect = "preempt-turn"
	InterleavePrompts        Defect = "interleave-prompts"
	IdlessErrorAnswers       Defect = "idless-error-answers"
	RelativePaths            Defect = "relative-paths"
	ForeignSession           Defect = "foreign-session"
	SchemaViolation          Defect = "schema-violation"
	UnknownSessionOK         Defect = "unknown-session-ok"
	LoadWithoutHistory       Defect = "load-without-history"
	ResumeReplaysHistory     Defect = "resume-replays-history"
	CloseKeepsServing        Defect = "close-keeps-serving"
	ListOmitsSessions        Defect = "list-omits-sessions"
)

// All lists every defect, in the order of the package comment.
var All = []Defect{
	NoReinit, AnswerNotifications, NullIDResponses, MissingJSONRPC,
	ResultAndError, StdoutNoise, StringProtocolVersion, BadProtocolVersion,
	SnakeCase, AtTypeUpdates, CanceledSpelling, EndTurnAfterCancel,
	IgnoreCancel, LateUpdates, EarlyUpdates, DanglingPermission,
	UnstableVariants, UnsupportedClientMethods, NullResults, WrongUnknownCode,
	NoParseError, DiesOnGarbage, ConcurrentPrompts, ConcurrentWork,
	DropSecondPrompt, PreemptTurn, InterleavePrompts, IdlessErrorAnswers, RelativePaths,
	ForeignSession, SchemaViolation, UnknownSessionOK,
	LoadWithoutHistory, ResumeReplaysHistory, CloseKeepsServing, ListOmitsSessions,
}

// The quirks of the package comment.
const (
	LateSessionUpdates  Defect = "late-session-updates"
	SessionMethods      Defect = "session-methods"
	AuthRequired        Defect = "auth-required"
	QueuePrompts        Defect = "queue-prompts"
	RememberAlwaysAllow Defect = "remember-always-allow"
)

// Quirks lists the quirks, in the order of the package comment.
var Quirks = []Defect{LateSessionUpdates, SessionMethods, AuthRequired, QueuePrompts, RememberAlwaysAllow}

// EnvDefects is the environment variable RunStdio reads the defects from.
const EnvDefects = "FLAWED_DEFECTS"

// Name is the agentInfo.name the agent reports.
const Name = "flawed-agent"

// Set is a set of switched-on defects.
type Set map[Defect]bool

// Parse reads a comma-separated list of defect names; an unknown name is an
// error, so a typo in a test cannot silently test the conformant agent.
func Parse(list string) (Set, error) {
	s := Set{}
	known := map[Defect]bool{}
	for _, d := range append(slices.Clone(All), Quirks...) {
		known[d] = true
	}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !known[Defect(f)] {
			return nil, fmt.Errorf("flawed agent: unknown defect %q", f)
		}
		s[Defect(f)] = true
	}
	return s, nil
}

// String lists the set's defects, sorted, comma-separated.
func (s Set) String() string {
	var names []string
	for d := range s {
		names = append(names, string(d))
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// RunStdio serves the agent on stdin/stdout with the defects named in
// FLAWED_DEFECTS and returns the process's exit status.
func RunStdio() int {
	set, err := Parse(os.Getenv(EnvDefects))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := Serve(os.Stdin, os.Stdout, set); err != nil {
		fmt.Fprintln(os.Stderr, "flawed agent:", err)
		return 1
	}
	return 0
}

// ServeFunc adapts Serve to fakeagent.ServeFunc, for fakeagent.WSServer.
func ServeFunc(set Set) fakeagent.ServeFunc {
	return func(in io.Reader, out io.Writer, _ fakeagent.Options) error { return Serve(in, out, set) }
}

// NewWSServer serves the agent with set at a ws:// URL (one connection, one agent).
func NewWSServer(set Set) *fakeagent.WSServer {
	return fakeagent.NewWSServer(ServeFunc(set), nil)
}

// errGarbage ends Serve under dies-on-garbage.
var errGarbage = errors.New("malformed JSON received, exiting (dies-on-garbage)")

// Serve runs one agent connection until in ends. Every Write to out is one
// whole line.
func Serve(in io.Reader, out io.Writer, set Set) error {
	a := &agent{
		d:        set,
		out:      out,
		sessions: map[string]*session{},
		pending:  map[string]chan json.RawMessage{},
	}
	a.noise("flawed agent starting")
	br := bufio.NewReaderSize(in, 1<<16)
	defer a.wg.Wait()
	for {
		line, err := br.ReadBytes('\n')
		if frame := bytes.TrimSpace(line); len(frame) > 0 {
			if herr := a.handle(frame); herr != nil {
				return herr
			}
		}
		if err != nil {
			a.closeAll()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

type agent struct {
	d   Set
	wmu sync.Mutex
	out io.Writer
	wg  sync.WaitGroup

	mu          sync.Mutex
	initialized bool // an initialize answer has gone out (or is going)
	inits       int
	clientCaps  json.RawMessage
	sessions    map[string]*session
	nextSession int
	nextReq     int
	pending     map[string]chan json.RawMessage
	// authenticated is set by authenticate (auth-required).
	authenticated bool
}

type session struct {
	id, cwd string
	running int           // prompts running (more than one only under concurrent-prompts)
	cancel  chan struct{} // closed by session/cancel while running
	// idle is closed when the running turn is answered (concurrent-work
	// holds a second prompt's answer until then).
	idle chan struct{}
	// queue are the prompts waiting for the running turn to end
	// (queue-prompts, preempt-turn).
	queue []waiting
	// history are the session's updates, for session/load.
	history []map[string]any
	closed  bool
}

// waiting is a prompt in a session's queue.
type waiting struct {
	id   json.RawMessage
	text string
}

// msg is an incoming JSON-RPC message, loosely typed so that invalid ones
// can be told apart.
type msg struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

func (a *agent) on(d Defect) bool { return a.d[d] }

// send writes one message. v's top-level "jsonrpc" is added unless
// missing-jsonrpc.
func (a *agent) send(fields map[string]any) { a.write(a.encode(fields)) }

// encode returns fields as one line of JSON-RPC.
func (a *agent) encode(fields map[string]any) []byte {
	if !a.on(MissingJSONRPC) {
		fields["jsonrpc"] = "2.0"
	}
	b, err := json.Marshal(fields)
	if err != nil {
		panic(err) // only our own values are marshalled
	}
	return append(b, '\n')
}

// write writes lines in one go, so that no other goroutine's message comes
// between them.
func (a *agent) write(lines []byte) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	_, _ = a.out.Write(lines)
}

func (a *agent) noise(text string) {
	if a.on(StdoutNoise) {
		a.wmu.Lock()
		fmt.Fprintf(a.out, "[flawed] %s\n", text)
		a.wmu.Unlock()
	}
}

func (a *agent) result(id json.RawMessage, v any) {
	a.send(map[string]any{"id": id, "result": v})
}

func (a *agent) fail(id json.RawMessage, code int, message string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	a.send(map[string]any{"id": id, "error": map[string]any{"code": code, "message": message}})
}

// update sends one session/update, shaped by snake-case and at-type-updates.
func (a *agent) update(sid string, upd map[string]any) {
	if a.sessionMethods() {
		a.mu.Lock()
		if s := a.sessions[sid]; s != nil {
			s.history = append(s.history, upd)
		}
		a.mu.Unlock()
	}
	a.send(a.updateMessage(sid, upd))
}

// sessionMethods reports whether session/load, resume, list and close
// are served (the quirk, or a defect of one of them).
func (a *agent) sessionMethods() bool {
	return a.on(SessionMethods) || a.on(LoadWithoutHistory) || a.on(ResumeReplaysHistory) || a.on(CloseKeepsServing) || a.on(ListOmitsSessions)
}

// updateMessage is the session/update notification update sends.
func (a *agent) updateMessage(sid string, upd map[string]any) map[string]any {
	if a.on(AtTypeUpdates) {
		upd = atType(upd)
	}
	var params any = map[string]any{"sessionId": sid, "update": upd}
	if a.on(SnakeCase) {
		params = snake(params)
	}
	return map[string]any{"method": "session/update", "params": params}
}

func (a *agent) chunk(sid, text string) {
	a.update(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}})
}

// request sends an agent→client request and returns the channel its answer
// (the whole response message) arrives on.
func (a *agent) request(method string, params any) chan json.RawMessage {
	a.mu.Lock()
	a.nextReq++
	id := a.nextReq
	ch := make(chan json.RawMessage, 1)
	a.pending[strconv.Itoa(id)] = ch
	a.mu.Unlock()
	a.send(map[string]any{"id": id, "method": method, "params": params})
	return ch
}

func (a *agent) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, ch := range a.pending {
		close(ch)
		delete(a.pending, k)
	}
	for _, s := range a.sessions {
		if s.running > 0 {
			select {
			case <-s.cancel:
			default:
				close(s.cancel)
			}
		}
	}
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

func (a *agent) handle(frame []byte) error {
	if !json.Valid(frame) {
		switch {
		case a.on(DiesOnGarbage):
			return errGarbage
		case a.on(NoParseError):
			return nil
		}
		a.fail(nil, -32700, "Parse error: the line is not JSON")
		return nil
	}
	var m msg
	if frame[0] != '{' || json.Unmarshal(frame, &m) != nil {
		a.fail(nil, -32600, "Invalid Request: not a JSON-RPC object")
		return nil
	}
	hasID := len(m.ID) > 0
	idOrNull := m.ID
	if !validID(m.ID) {
		idOrNull = nil
	}
	if m.JSONRPC == nil || *m.JSONRPC != "2.0" {
		a.fail(idOrNull, -32600, `Invalid Request: "jsonrpc" must be "2.0"`)
		return nil
	}
	if len(m.Method) == 0 {
		if hasID && (len(m.Result) > 0 || len(m.Error) > 0) {
			a.mu.Lock()
			ch := a.pending[strings.Trim(string(m.ID), `"`)]
			delete(a.pending, strings.Trim(string(m.ID), `"`))
			a.mu.Unlock()
			if ch != nil {
				ch <- append(json.RawMessage(nil), frame...)
			}
			return nil
		}
		a.fail(idOrNull, -32600, "Invalid Request: no method")
		return nil
	}
	var method string
	if json.Unmarshal(m.Method, &method) != nil {
		a.fail(idOrNull, -32600, "Invalid Request: method must be a string")
		return nil
	}
	if !hasID {
		if !a.isInitialized() {
			fmt.Fprintf(os.Stderr, "flawed agent: dropped %s: it came before initialize was answered\n", method)
			return nil
		}
		a.notification(method, m.Params)
		return nil
	}
	if !validID(m.ID) {
		a.fail(nil, -32600, "Invalid Request: id must be a string or a number")
		return nil
	}
	if method != "initialize" && !a.isInitialized() {
		fmt.Fprintf(os.Stderr, "flawed agent: refused %s: it came before initialize was answered\n", method)
		a.send(map[string]any{"id": m.ID, "error": json.RawMessage(fakeagent.PreInitError(method))})
		return nil
	}
	a.call(m.ID, method, m.Params)
	return nil
}

func (a *agent) notification(method string, params json.RawMessage) {
	if a.on(AnswerNotifications) {
		a.send(map[string]any{"id": nil, "result": map[string]any{}})
	}
	if a.on(IdlessErrorAnswers) {
		a.send(map[string]any{"error": map[string]any{"code": -32601, "message": "Method not found: " + method}})
	}
	if method != "session/cancel" {
		return // unknown notifications are ignored
	}
	var p struct{ SessionID string }
	_ = json.Unmarshal(params, &p)
	a.mu.Lock()
	s := a.sessions[p.SessionID]
	if s == nil {
		a.mu.Unlock()
		return
	}
	queued := s.queue
	s.queue = nil
	a.mu.Unlock()
	// The waiting prompts are answered first, then the running turn ends.
	if stop := a.cancelled(); stop != "" {
		for _, w := range queued {
			a.answerPrompt(w.id, s.id, stop)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.running > 0 {
		closeOnce(s.cancel)
	}
}

// closeOnce closes c unless it is closed already; the caller holds a.mu.
func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

func (a *agent) call(id json.RawMessage, method string, params json.RawMessage) {
	switch method {
	case "initialize":
		a.initialize(id, params)
	case "authenticate":
		a.mu.Lock()
		a.authenticated = true
		a.mu.Unlock()
		a.nullable(id)
	case "session/new":
		a.newSession(id, params)
	case "session/set_mode":
		var p struct{ SessionID, ModeID string }
		_ = json.Unmarshal(params, &p)
		if a.lookup(p.SessionID) == nil {
			a.fail(id, -32602, fmt.Sprintf("Invalid params: unknown session %q; create one with session/new", p.SessionID))
			return
		}
		if p.ModeID != "default" && p.ModeID != "plan" {
			a.fail(id, -32602, fmt.Sprintf("Invalid params: unknown mode %q; the session advertised default and plan", p.ModeID))
			return
		}
		a.nullable(id)
	case "session/prompt":
		a.prompt(id, params)
	case "session/load", "session/resume", "session/list", "session/close":
		if !a.sessionMethods() {
			a.fail(id, -32601, fmt.Sprintf("Method not found: %s", method))
			return
		}
		a.sessionMethod(id, method, params)
	default:
		if a.on(WrongUnknownCode) {
			a.fail(id, -32603, "Internal error: "+method)
			return
		}
		a.fail(id, -32601, fmt.Sprintf("Method not found: %s", method))
	}
}

func (a *agent) nullable(id json.RawMessage) {
	if a.on(NullResults) {
		a.result(id, nil)
		return
	}
	a.result(id, map[string]any{})
}

func (a *agent) isInitialized() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.initialized
}

// initialize answers after fakeagent.InitDelay, off the read loop, so that
// frames sent right behind it arrive while it is unanswered.
func (a *agent) initialize(id, params json.RawMessage) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		time.Sleep(fakeagent.InitDelay)
		a.answerInitialize(id, params)
	}()
}

func (a *agent) answerInitialize(id, params json.RawMessage) {
	a.mu.Lock()
	a.inits++
	n := a.inits
	var p struct{ ClientCapabilities json.RawMessage }
	_ = json.Unmarshal(params, &p)
	a.clientCaps = p.ClientCapabilities
	a.mu.Unlock()
	if n > 1 && a.on(NoReinit) {
		a.fail(id, -32600, "Invalid Request: already initialized")
		return
	}
	a.mu.Lock()
	a.initialized = true
	a.mu.Unlock()
	var version any = 1
	switch {
	case a.on(StringProtocolVersion):
		version = "1"
	case a.on(BadProtocolVersion):
		version = 99
	}
	caps := map[string]any{
		"loadSession":        false,
		"promptCapabilities": map[string]any{"image": false, "audio": false, "embeddedContext": false},
		"mcpCapabilities":    map[string]any{"http": false, "sse": false},
	}
	if a.sessionMethods() {
		caps["loadSession"] = true
		caps["sessionCapabilities"] = map[string]any{"list": map[string]any{}, "resume": map[string]any{}, "close": map[string]any{}}
	}
	methods := []any{}
	if a.on(AuthRequired) {
		methods = append(methods, map[string]any{"id": "flawed-login", "name": "Log in to the flawed agent", "description": "Sets the session token."})
	}
	a.result(id, map[string]any{
		"protocolVersion":   version,
		"agentCapabilities": caps,
		"agentInfo":         map[string]any{"name": Name, "version": "1.0.0"},
		"authMethods":       methods,
	})
	if a.on(NullIDResponses) {
		a.send(map[string]any{"id": nil, "result": map[string]any{}})
	}
}

func (a *agent) lookup(sid string) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[sid]
}

func (a *agent) newSession(id, params json.RawMessage) {
	var p struct{ Cwd string }
	_ = json.Unmarshal(params, &p)
	if !filepath.IsAbs(p.Cwd) {
		a.fail(id, -32602, fmt.Sprintf("Invalid params: cwd %q must be an absolute path", p.Cwd))
		return
	}
	a.mu.Lock()
	authed := a.authenticated
	a.mu.Unlock()
	if a.on(AuthRequired) && !authed {
		a.fail(id, -32000, "Authentication required: call authenticate with flawed-login first")
		return
	}
	if fi, err := os.Stat(p.Cwd); err != nil || !fi.IsDir() {
		// As real agents do: they run tools there.
		a.fail(id, -32602, fmt.Sprintf("Invalid params: cwd %q is not a directory", p.Cwd))
		return
	}
	a.mu.Lock()
	a.nextSession++
	sid := "flawed-" + strconv.Itoa(a.nextSession)
	a.sessions[sid] = &session{id: sid, cwd: p.Cwd}
	a.mu.Unlock()
	if a.on(EarlyUpdates) {
		a.update(sid, map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{}})
	}
	res := map[string]any{
		"sessionId": sid,
		"modes": map[string]any{
			"currentModeId": "default",
			"availableModes": []any{
				map[string]any{"id": "default", "name": "Default"},
				map[string]any{"id": "plan", "name": "Plan"},
			},
		},
	}
	if a.on(SnakeCase) {
		a.result(id, snake(res))
		return
	}
	a.result(id, res)
}

func (a *agent) prompt(id, params json.RawMessage) {
	var p struct {
		SessionID string
		Prompt    []struct{ Type, Text string }
	}
	if err := json.Unmarshal(params, &p); err != nil {
		a.fail(id, -32602, "Invalid params: "+err.Error())
		return
	}
	a.mu.Lock()
	s := a.sessions[p.SessionID]
	if s == nil && a.on(UnknownSessionOK) {
		s = &session{id: p.SessionID, cwd: os.TempDir()}
		a.sessions[p.SessionID] = s
	}
	if s == nil || s.closed && !a.on(CloseKeepsServing) {
		a.mu.Unlock()
		a.fail(id, -32602, fmt.Sprintf("Invalid params: unknown session %q; create one with session/new", p.SessionID))
		return
	}
	text := ""
	for _, b := range p.Prompt {
		if b.Type == "text" {
			text = b.Text
			break
		}
	}
	cancel, idle, first := s.cancel, s.idle, false
	var wait chan struct{} // closed when the turn this one runs alongside is answered
	switch {
	case s.running == 0 && len(s.queue) == 0:
		s.cancel, s.idle = make(chan struct{}), make(chan struct{})
		cancel, idle, first = s.cancel, s.idle, true
	case a.on(DropSecondPrompt):
		a.mu.Unlock()
		return
	case a.on(QueuePrompts) || a.on(PreemptTurn):
		s.queue = append(s.queue, waiting{id, text})
		if a.on(PreemptTurn) && s.running > 0 {
			closeOnce(s.cancel)
		}
		a.mu.Unlock()
		return
	case a.on(ConcurrentWork) || a.on(InterleavePrompts):
		wait = s.idle
	case a.on(ConcurrentPrompts):
	default:
		a.mu.Unlock()
		a.fail(id, -32602, fmt.Sprintf("Invalid params: session %q already has a prompt running; wait for its answer or cancel it", s.id))
		return
	}
	s.running++
	s.history = append(s.history, map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": text}})
	caps := a.clientCaps
	a.mu.Unlock()
	a.wg.Add(1)
	go a.turn(s, id, text, caps, cancel, idle, first, wait)
}

// turn plays one prompt's turn and answers it. The first turn of a busy
// spell closes idle once answered and starts the prompt waiting next, if
// any; a turn run alongside it waits for that (wait) before its answer.
func (a *agent) turn(s *session, id json.RawMessage, text string, caps json.RawMessage, cancel, idle chan struct{}, first bool, wait chan struct{}) {
	defer a.wg.Done()
	var stop string
	if wait != nil && a.on(InterleavePrompts) {
		stop = a.interleaved(s, caps, cancel, wait)
	} else {
		stop = a.run(s, text, caps, cancel)
		if wait != nil {
			<-wait
		}
	}
	a.mu.Lock()
	s.running--
	a.mu.Unlock()
	if stop == "" { // ignore-cancel
		return
	}
	a.answerPrompt(id, s.id, stop)
	if first {
		close(idle)
	}
	if stop == a.cancelled() && a.on(LateSessionUpdates) {
		a.update(s.id, map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{}})
	}
	if !first {
		return
	}
	a.mu.Lock()
	if len(s.queue) == 0 || s.running > 0 {
		a.mu.Unlock()
		return
	}
	next := s.queue[0]
	s.queue = s.queue[1:]
	s.cancel, s.idle = make(chan struct{}), make(chan struct{})
	cancel, idle = s.cancel, s.idle
	s.running++
	s.history = append(s.history, map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": next.text}})
	caps = a.clientCaps
	a.mu.Unlock()
	a.wg.Add(1)
	go a.turn(s, next.id, next.text, caps, cancel, idle, true, nil)
}

// sessionMethod serves session/load, resume, list and close.
func (a *agent) sessionMethod(id json.RawMessage, method string, params json.RawMessage) {
	var p struct{ SessionID, Cwd string }
	_ = json.Unmarshal(params, &p)
	if method == "session/list" {
		sessions := []any{}
		a.mu.Lock()
		for _, s := range a.sessions {
			if !s.closed && !a.on(ListOmitsSessions) && (p.Cwd == "" || p.Cwd == s.cwd) {
				sessions = append(sessions, map[string]any{"sessionId": s.id, "cwd": s.cwd})
			}
		}
		a.mu.Unlock()
		a.result(id, map[string]any{"sessions": sessions})
		return
	}
	a.mu.Lock()
	s := a.sessions[p.SessionID]
	if s == nil || s.closed {
		a.mu.Unlock()
		a.fail(id, -32602, fmt.Sprintf("Invalid params: unknown session %q", p.SessionID))
		return
	}
	history := slices.Clone(s.history)
	if method == "session/close" {
		s.closed = true
		if s.running > 0 {
			select {
			case <-s.cancel:
			default:
				close(s.cancel)
			}
		}
	}
	a.mu.Unlock()
	replay := method == "session/load" && !a.on(LoadWithoutHistory) || method == "session/resume" && a.on(ResumeReplaysHistory)
	if replay {
		for _, upd := range history {
			a.send(a.updateMessage(s.id, upd))
		}
	}
	a.result(id, map[string]any{})
}

func (a *agent) answerPrompt(id json.RawMessage, sid, stop string) {
	a.noise("turn ended: " + stop)
	res := map[string]any{"stopReason": stop}
	if a.on(SnakeCase) {
		res = snake(res).(map[string]any)
	}
	m := map[string]any{"id": id, "result": res}
	if a.on(ResultAndError) {
		m["error"] = map[string]any{"code": -32603, "message": "Internal error"}
	}
	if !a.on(LateUpdates) {
		a.send(m)
		return
	}
	// The late update follows the answer at once, in the same write, so
	// that it reaches the client before any answer to a later request.
	late := a.updateMessage(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "(a late afterthought)"}})
	a.write(append(a.encode(m), a.encode(late)...))
}

// cancelled is the stop reason of a cancelled turn, or "" for ignore-cancel.
func (a *agent) cancelled() string {
	switch {
	case a.on(IgnoreCancel):
		return ""
	case a.on(CanceledSpelling):
		return "canceled"
	case a.on(EndTurnAfterCancel):
		return "end_turn"
	}
	return "cancelled"
}

func isCancelled(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// run plays the script text picks and returns the stop reason.
func (a *agent) run(s *session, text string, caps json.RawMessage, cancel chan struct{}) string {
	switch {
	case strings.Contains(text, "permission"):
		return a.permission(s, cancel)
	case strings.Contains(text, "wait-cancel"):
		<-cancel
		return a.cancelled()
	case strings.Contains(text, "long"):
		if a.on(RememberAlwaysAllow) {
			// As a Claude agent writing a story into a file: permission
			// first, before any update.
			tc := map[string]any{"toolCallId": "call-story", "title": "Write story.md", "kind": "edit", "status": "pending"}
			if _, ok := a.askPermission(s, cancel, tc); !ok {
				return a.cancelled()
			}
		}
		deadline := time.After(10 * time.Second)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-cancel:
				return a.cancelled()
			case <-deadline:
				return "end_turn"
			case <-tick.C:
				a.chunk(s.id, fmt.Sprintf("line %d\n", i))
			}
		}
	case strings.Contains(text, "file") || text == "fs":
		return a.readFile(s, caps, cancel)
	}
	for _, part := range []string{"Hello", ", ", "world."} {
		if isCancelled(cancel) {
			return a.cancelled()
		}
		a.chunk(s.id, part)
	}
	if a.on(UnstableVariants) {
		a.update(s.id, map[string]any{"sessionUpdate": "subagent_update", "subagentId": "sub-1"})
	}
	if a.on(SchemaViolation) {
		a.update(s.id, map[string]any{"sessionUpdate": "agent_message_chunk", "content": "a string is not a ContentBlock"})
	}
	return "end_turn"
}

func (a *agent) permission(s *session, cancel chan struct{}) string {
	a.update(s.id, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-1", "title": "Edit hello.txt", "kind": "edit", "status": "pending"})
	choice, ok := a.askPermission(s, cancel, map[string]any{"toolCallId": "call-1", "title": "Edit hello.txt", "kind": "edit", "status": "pending"})
	if !ok {
		return a.cancelled()
	}
	status := "failed"
	if choice == "allow" || choice == "allow-always" {
		status = "completed"
	}
	a.update(s.id, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": status})
	a.chunk(s.id, "Permission answered: "+choice)
	return "end_turn"
}

// alwaysAllowed is the file remember-always-allow keeps in a working
// directory once the client chose "Always Allow" there.
const alwaysAllowed = ".flawed-always-allow"

// askPermission asks the client's permission for the tool call tc and
// returns the option chosen; ok is false when the turn was cancelled. Under remember-always-allow it offers "Always Allow" first,
// remembers that choice in the session's cwd, and once remembered asks no
// more there.
func (a *agent) askPermission(s *session, cancel chan struct{}, tc map[string]any) (choice string, ok bool) {
	remember := a.on(RememberAlwaysAllow)
	if _, err := os.Stat(filepath.Join(s.cwd, alwaysAllowed)); remember && err == nil {
		return "allow-always", true
	}
	options := []any{
		map[string]any{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
		map[string]any{"optionId": "reject", "name": "Reject", "kind": "reject_once"},
	}
	if remember {
		options = append([]any{map[string]any{"optionId": "allow-always", "name": "Always Allow", "kind": "allow_always"}}, options...)
	}
	ch := a.request("session/request_permission", map[string]any{
		"sessionId": a.sessionFor(s.id),
		"toolCall":  tc,
		"options":   options,
	})
	var answer json.RawMessage
	select {
	case answer = <-ch:
	case <-cancel:
		if a.on(DanglingPermission) {
			return "", false
		}
		answer = <-ch // the client answers a pending permission with "cancelled"
	}
	var r struct {
		Result struct {
			Outcome struct{ Outcome, OptionID string }
		}
	}
	_ = json.Unmarshal(answer, &r)
	if isCancelled(cancel) || r.Result.Outcome.Outcome != "selected" {
		return "", false
	}
	if remember && r.Result.Outcome.OptionID == "allow-always" {
		_ = os.WriteFile(filepath.Join(s.cwd, alwaysAllowed), nil, 0o644)
	}
	return r.Result.Outcome.OptionID, true
}

func (a *agent) sessionFor(sid string) string {
	if a.on(ForeignSession) {
		return "flawed-999"
	}
	return sid
}

func (a *agent) readFile(s *session, caps json.RawMessage, cancel chan struct{}) string {
	var c struct {
		FS       struct{ ReadTextFile, WriteTextFile bool }
		Terminal bool
	}
	_ = json.Unmarshal(caps, &c)
	path := filepath.Join(s.cwd, "hello.txt")
	if a.on(RelativePaths) {
		path = "hello.txt"
	}
	var waits []chan json.RawMessage
	if c.FS.ReadTextFile {
		waits = append(waits, a.request("fs/read_text_file", map[string]any{"sessionId": a.sessionFor(s.id), "path": path}))
	}
	if a.on(UnsupportedClientMethods) {
		if !c.FS.WriteTextFile {
			waits = append(waits, a.request("fs/write_text_file", map[string]any{"sessionId": s.id, "path": filepath.Join(s.cwd, "out.txt"), "content": "x"}))
		}
		if !c.Terminal {
			waits = append(waits, a.request("terminal/create", map[string]any{"sessionId": s.id, "command": "true"}))
		}
	}
	if len(waits) == 0 {
		a.chunk(s.id, "The client cannot read files.")
		return "end_turn"
	}
	for _, ch := range waits {
		select {
		case <-ch:
		case <-cancel:
			return a.cancelled()
		}
	}
	a.chunk(s.id, "I read the file.")
	return "end_turn"
}

// interleaved plays a second prompt under interleave-prompts: its work
// begins at once, beside the running turn (a tool call reading hello.txt
// and its fs/read_text_file), and ends only once that turn is answered
// (wait closed).
func (a *agent) interleaved(s *session, caps json.RawMessage, cancel, wait chan struct{}) string {
	path := filepath.Join(s.cwd, "hello.txt")
	a.update(s.id, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-read", "title": "Read hello.txt", "kind": "read", "status": "in_progress",
		"locations": []any{map[string]any{"path": path}}})
	var c struct{ FS struct{ ReadTextFile bool } }
	_ = json.Unmarshal(caps, &c)
	if c.FS.ReadTextFile {
		select {
		case <-a.request("fs/read_text_file", map[string]any{"sessionId": s.id, "path": path}):
		case <-cancel:
		}
	}
	<-wait
	if isCancelled(cancel) {
		return a.cancelled()
	}
	a.update(s.id, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-read", "status": "completed"})
	a.chunk(s.id, "I read the file.")
	return "end_turn"
}

// atType rewrites an update into the "@type" shape of
// docs/agent-protocols.md#at-type-updates.
func atType(upd map[string]any) map[string]any {
	out := map[string]any{}
	kind, _ := upd["sessionUpdate"].(string)
	switch kind {
	case "agent_message_chunk", "agent_thought_chunk":
		out["@type"] = strings.TrimSuffix(kind, "_chunk") + "_text"
		if c, ok := upd["content"].(map[string]any); ok {
			out["text"] = c["text"]
		}
		return out
	case "tool_call":
		out["@type"] = "tool_call_start"
	case "plan":
		out["@type"] = "plan_update"
	default:
		out["@type"] = kind
	}
	for k, v := range upd {
		if k != "sessionUpdate" {
			out[k] = v
		}
	}
	return out
}

// snake rewrites every object key of v from camelCase to snake_case.
func snake(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[snakeKey(k)] = snake(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = snake(x)
		}
		return out
	}
	return v
}

func snakeKey(k string) string {
	var b strings.Builder
	for i, r := range k {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
