// Package fakeclaude is a scripted stand-in for the Claude Code CLI in
// stream-json mode, for acp-bridge's end-to-end tests of the
// claude-stream-json dialect. It speaks what Claude Code 2.0.77 speaks on
// stdin and stdout with --input-format/--output-format stream-json and
// --permission-prompt-tool stdio, replaying the frames captured in
// docs/agent-protocols.md#claude-stream-json-captured-run:
//
//   - it refuses to start (exit status 2) unless its command line has the
//     stream-json flags and exactly one of --session-id and --resume with a
//     UUID, as the real CLI refuses bad flags;
//   - control requests initialize, interrupt, set_permission_mode and
//     set_model are answered with control_response; initialize is answered
//     after fakeagent.InitDelay, and any message that arrives while it is
//     unanswered is recorded as a violation (then handled): a host that
//     sends initialize must wait for its answer, as the Claude Agent SDK
//     does, and the delay catches one that does not every time;
//   - each user message runs a script chosen by its text (see Scripts);
//     tools that need approval ask with control_request can_use_tool and
//     wait for the control_response;
//   - an interrupt ends the running turn with "[Request interrupted by
//     user]" and an error_during_execution result; the process then takes
//     the next user message;
//   - a user message that comes while a turn runs is queued and taken
//     when the turn ends (echoed then, with --replay-user-messages).
//
// With EnvVersion naming a 2.1 version it speaks as Claude Code 2.1 does
// (the shapes claude-agent-acp 0.23.1 is built for): the initialize answer
// lists 2.1's models and slash commands (an argumentHint may be a list),
// a rate_limit_event opens each turn, assistant messages carry usage, a
// system message follows each tool result, the result names each model's
// context window, a tool that succeeded calls the host's PostToolUse hook
// callbacks (registered in initialize) and its result carries
// tool_use_result, session_state_changed frames each turn when
// CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS is set, and with
// --replay-user-messages each user message is echoed back with its uuid.
// With EnvSeed set, messages that may come anywhere in a 2.1 turn
// (system status and informational, rate_limit_event, tool_progress,
// keep_alive) are put at random points between the script's frames, the
// same points for the same seed.
//
// Everything the process receives and sends, its command line and cwd, and
// the script's milestones ("allow", "deny", "interrupt", "eof"…) are
// appended to a journal file in the directory EnvJournal names, which the
// tests read back with ReadJournals.
package fakeclaude

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// EnvJournal names the directory journals are written to.
const EnvJournal = "FAKE_CLAUDE_JOURNAL"

// EnvVersion is the Claude Code version the fake speaks as: "2.0.77" (the
// default) or a 2.1 version such as Version21.
const EnvVersion = "FAKE_CLAUDE_VERSION"

// EnvSeed, when set to a number, puts messages that may come anywhere in a
// turn at random points chosen by it.
const EnvSeed = "FAKE_CLAUDE_SEED"

// Version21 is the 2.1 version the fake's 2.1 shapes are modelled on.
const Version21 = "2.1.332"

// ContextWindow is the context window the 2.1 results name for the main
// model; the small model's window, 200000, is smaller.
const ContextWindow = 1000000

// Texts the scripts use, named so that tests can compare exactly.
const (
	// ToolOutput is what the "list files" script's Bash tool prints.
	ToolOutput = "a.txt"
	// Rejected is the tool result of a denied tool (the real CLI's words).
	Rejected = "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed."
	// APIError is the captured text of an unusable backend.
	APIError = "API Error: 426 Upgrade Required"
	// LoginError is what the CLI says without credentials.
	LoginError = "Invalid API key · Please run /login"
)

// Scripts are the prompt texts the fake CLI knows; any other text is
// answered with "echo: <text>".
var Scripts = []string{"list files", "touch", "seam", "plan", "two tools", "slow", "crash", "mode", "whoami", "api error", "login"}

// requiredFlags must all be on the command line, each with its value.
var requiredFlags = [][]string{
	{"--output-format", "stream-json"},
	{"--input-format", "stream-json"},
	{"--verbose"},
	{"--include-partial-messages"},
	{"--permission-prompt-tool", "stdio"},
}

// cli is one fake CLI process.
type cli struct {
	argv    []string
	session string
	resumed bool
	model   string
	j       *journal

	wmu sync.Mutex // one line per write on stdout

	mu      sync.Mutex
	mode    string
	turn    *turn
	next    int                          // control request ids of the CLI
	answers map[string]chan gjson.Result // can_use_tool request id → answer
	// postToolUse are the host's PostToolUse hook callback ids (from
	// initialize), called after each tool that succeeded (2.1).
	postToolUse []string
	// tools are the tool uses sent, by id: name and input.
	tools    map[string]gjson.Result
	bypassOK bool
	// initPending is true from the initialize control request until its
	// answer goes out.
	initPending bool

	version string
	v21     bool // version is a 2.1 one
	// stateEvents: send session_state_changed (2.1, asked for by env).
	stateEvents bool
	replay      bool // --replay-user-messages
	// queue holds the user messages that came while a turn ran.
	queue []gjson.Result
	noise *rand.Rand
	// usage is what the assistant messages of the turn report, grown per
	// message.
	usage   int
	touches int // "touch" turns run
}

// turn is the running user message.
type turn struct {
	interrupted chan struct{}
	once        sync.Once
}

func (t *turn) interrupt() { t.once.Do(func() { close(t.interrupted) }) }

// RunStdio runs the fake CLI on the process's stdin and stdout with the
// process's arguments, and returns the exit status.
func RunStdio() int {
	c := &cli{argv: os.Args[1:], mode: "default", answers: map[string]chan gjson.Result{}, tools: map[string]gjson.Result{}, version: "2.0.77"}
	if v := os.Getenv(EnvVersion); v != "" {
		c.version = v
	}
	c.v21 = strings.HasPrefix(c.version, "2.1.")
	c.stateEvents = c.v21 && os.Getenv("CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS") != ""
	if seed, err := strconv.ParseUint(os.Getenv(EnvSeed), 10, 64); err == nil {
		c.noise = rand.New(rand.NewPCG(seed, seed))
	}
	cwd, _ := os.Getwd()
	j, err := openJournal(os.Getenv(EnvJournal), c.argv, cwd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake claude:", err)
		return 1
	}
	c.j = j
	defer j.close()
	if err := c.parseFlags(); err != nil {
		j.event("bad flags: " + err.Error())
		fmt.Fprintln(os.Stderr, "error:", err)
		return 2
	}
	br := bufio.NewReaderSize(os.Stdin, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if l := bytes.TrimRight(line, "\r\n"); len(bytes.TrimSpace(l)) > 0 {
			j.received(l)
			c.receive(l)
		}
		if err != nil {
			j.event("eof")
			c.mu.Lock()
			if c.turn != nil {
				c.turn.interrupt()
			}
			c.mu.Unlock()
			return 0
		}
	}
}

func (c *cli) parseFlags() error {
	has := func(flag ...string) bool {
		for i := range c.argv {
			if i+len(flag) <= len(c.argv) && slices.Equal(c.argv[i:i+len(flag)], flag) {
				return true
			}
		}
		return false
	}
	for _, f := range requiredFlags {
		if !has(f...) {
			return fmt.Errorf("missing %s", strings.Join(f, " "))
		}
	}
	value := func(flag string) string {
		for i, a := range c.argv {
			if a == flag && i+1 < len(c.argv) {
				return c.argv[i+1]
			}
		}
		return ""
	}
	sid, resume := value("--session-id"), value("--resume")
	switch {
	case (sid == "") == (resume == ""):
		return fmt.Errorf("want exactly one of --session-id and --resume")
	case resume != "":
		c.session, c.resumed = resume, true
	default:
		c.session = sid
	}
	if len(c.session) != 36 || strings.Count(c.session, "-") != 4 {
		return fmt.Errorf("invalid session id %q: must be a valid UUID", c.session)
	}
	if m := value("--permission-mode"); m != "" {
		c.mode = m
	}
	c.model = value("--model")
	c.bypassOK = has("--dangerously-skip-permissions") || has("--allow-dangerously-skip-permissions")
	c.replay = has("--replay-user-messages")
	return nil
}

func (c *cli) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.noise != nil && gjson.GetBytes(b, "type").Str != "control_response" {
		for c.noise.IntN(3) == 0 {
			c.write(c.noiseMessage())
		}
	}
	c.write(b)
}

func (c *cli) write(b []byte) {
	c.j.sent(b)
	os.Stdout.Write(append(b, '\n'))
}

// noiseMessage is one message that may come at any point of a 2.1 turn.
func (c *cli) noiseMessage() []byte {
	var m obj
	switch c.noise.IntN(5) {
	case 0:
		m = obj{"type": "system", "subtype": "status", "status": nil}
	case 1:
		m = obj{"type": "system", "subtype": "informational", "content": "noise", "level": "info"}
	case 2:
		m = obj{"type": "rate_limit_event", "rate_limit_info": obj{"status": "allowed"}}
	case 3:
		m = obj{"type": "tool_progress", "tool_use_id": "toolu_noise", "tool_name": "Bash", "elapsed_time_seconds": 1}
	default:
		m = obj{"type": "keep_alive"}
	}
	m["session_id"] = c.session
	m["uuid"] = "noise"
	b, _ := json.Marshal(m)
	return b
}

type obj = map[string]any

func (c *cli) controlSuccess(id string, response any) {
	r := obj{"subtype": "success", "request_id": id}
	if response != nil {
		r["response"] = response
	}
	c.send(obj{"type": "control_response", "response": r})
}

func (c *cli) receive(line []byte) {
	m := gjson.ParseBytes(line)
	c.mu.Lock()
	pending := c.initPending
	c.mu.Unlock()
	if pending {
		what := m.Get("type").Str
		if sub := m.Get("request.subtype").Str; sub != "" {
			what += " " + sub
		}
		c.j.event("violation: " + what + " before the initialize control_response")
	}
	switch m.Get("type").Str {
	case "control_request":
		id := m.Get("request_id").Str
		req := m.Get("request")
		switch sub := req.Get("subtype").Str; sub {
		case "initialize":
			c.mu.Lock()
			c.initPending = true
			for _, ids := range req.Get("hooks.PostToolUse.#.hookCallbackIds").Array() {
				for _, h := range ids.Array() {
					c.postToolUse = append(c.postToolUse, h.Str)
				}
			}
			c.mu.Unlock()
			go c.answerInitialize(id)
		case "interrupt":
			c.j.event("interrupt")
			c.mu.Lock()
			if c.turn != nil {
				c.turn.interrupt()
			}
			c.mu.Unlock()
			c.controlSuccess(id, nil)
		case "set_permission_mode":
			mode := req.Get("mode").Str
			if mode == "bypassPermissions" && !c.bypassOK {
				c.send(obj{"type": "control_response", "response": obj{"subtype": "error", "request_id": id,
					"error": "Cannot set permission mode to bypassPermissions because the session was not launched with --dangerously-skip-permissions"}})
				return
			}
			c.mu.Lock()
			c.mode = mode
			c.mu.Unlock()
			c.j.event("mode " + mode)
			c.controlSuccess(id, nil)
		case "set_model":
			c.j.event("model " + req.Get("model").Str)
			c.controlSuccess(id, nil)
		default:
			c.send(obj{"type": "control_response", "response": obj{"subtype": "error", "request_id": id, "error": "Unsupported control request subtype: " + sub}})
		}
	case "control_response":
		id := m.Get("response.request_id").Str
		c.mu.Lock()
		ch := c.answers[id]
		delete(c.answers, id)
		c.mu.Unlock()
		if ch == nil {
			c.j.event("violation: control_response for unknown request " + id)
			return
		}
		ch <- m.Get("response")
	case "user":
		c.mu.Lock()
		if c.turn != nil {
			// Queued, as the CLI queues input that comes while a turn
			// runs: taken when the turn ends.
			c.queue = append(c.queue, m)
			c.mu.Unlock()
			c.j.event("queued")
			return
		}
		t := &turn{interrupted: make(chan struct{})}
		c.turn = t
		c.mu.Unlock()
		c.take(t, m)
	default:
		c.j.event("violation: unknown message " + m.Get("type").Str)
	}
}

// take starts turn t for user message m, echoing m first with
// --replay-user-messages: the message with its uuid, which the SDK hosts
// match to their prompt.
func (c *cli) take(t *turn, m gjson.Result) {
	if c.replay {
		var echo obj
		_ = json.Unmarshal([]byte(m.Raw), &echo)
		echo["session_id"] = c.session
		echo["isReplay"] = true
		c.send(echo)
	}
	var text []string
	for _, b := range m.Get("message.content").Array() {
		if b.Get("type").Str == "text" {
			text = append(text, b.Get("text").Str)
		}
	}
	go c.run(t, strings.Join(text, ""))
}

// answerInitialize answers the initialize control request after
// fakeagent.InitDelay; the message is over once the answer is on its way.
func (c *cli) answerInitialize(id string) {
	time.Sleep(fakeagent.InitDelay)
	c.mu.Lock()
	c.initPending = false
	c.mu.Unlock()
	if c.v21 {
		c.controlSuccess(id, obj{
			"commands": []obj{
				{"name": "compact", "description": "Clear conversation history but keep a summary in context", "argumentHint": "<optional custom summarization instructions>"},
				{"name": "cost", "description": "Show the total cost and duration of the current session", "argumentHint": ""},
				{"name": "review", "description": "Review a pull request", "argumentHint": []string{"<pr>", "[focus]"}},
			},
			"agents":                  []obj{{"name": "general-purpose", "description": "General-purpose agent"}},
			"output_style":            "default",
			"available_output_styles": []string{"default"},
			"models":                  Models21,
			"account":                 obj{"apiKeySource": "ANTHROPIC_API_KEY", "apiProvider": "firstParty"},
		})
		return
	}
	c.controlSuccess(id, obj{
		"commands": []obj{
			{"name": "compact", "description": "Clear conversation history but keep a summary in context", "argumentHint": "<optional custom summarization instructions>"},
			{"name": "review", "description": "Review a pull request", "argumentHint": ""},
		},
		"output_style": "default",
		"models": []obj{
			{"value": "default", "displayName": "Default (recommended)", "description": "Sonnet 4.5"},
			{"value": "opus", "displayName": "Opus", "description": "Opus 4.1"},
		},
	})
}

// Models21 are the models the 2.1 fake's initialize answer lists.
var Models21 = []obj{
	{"value": "default", "displayName": "Default (recommended)", "description": "Opus 4.6 · Most capable for complex work"},
	{"value": "sonnet", "displayName": "Sonnet", "description": "Sonnet 4.6 · Best for everyday tasks"},
	{"value": "haiku", "displayName": "Haiku", "description": "Haiku 4.5 · Fastest for quick answers"},
}

func (c *cli) streamEvent(ev obj) {
	c.send(obj{"type": "stream_event", "event": ev, "session_id": c.session, "parent_tool_use_id": nil, "uuid": "u"})
}

func (c *cli) streamText(index int, parts ...string) {
	c.streamEvent(obj{"type": "content_block_start", "index": index, "content_block": obj{"type": "text", "text": ""}})
	for _, p := range parts {
		c.streamEvent(obj{"type": "content_block_delta", "index": index, "delta": obj{"type": "text_delta", "text": p}})
	}
	c.streamEvent(obj{"type": "content_block_stop", "index": index})
}

func (c *cli) assistant(id string, content ...obj) {
	message := obj{"id": id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": content}
	if c.v21 {
		// The context grows with each message: input, cache and output.
		c.mu.Lock()
		c.usage += 100
		u := c.usage
		c.mu.Unlock()
		message["usage"] = obj{"input_tokens": 10, "cache_read_input_tokens": u, "cache_creation_input_tokens": 5, "output_tokens": 7}
	}
	c.mu.Lock()
	for _, b := range content {
		if b["type"] == "tool_use" {
			raw, _ := json.Marshal(b)
			c.tools[b["id"].(string)] = gjson.ParseBytes(raw)
		}
	}
	c.mu.Unlock()
	c.send(obj{"type": "assistant", "message": message, "parent_tool_use_id": nil, "session_id": c.session, "uuid": "u"})
}

// ContextUsed is what the 2.1 fake's usage_update should report after n
// assistant messages in a session: the last one's input, cache and
// output tokens.
func ContextUsed(n int) int { return 10 + 100*n + 5 + 7 }

func (c *cli) toolResult(id string, content string, isError bool) {
	msg := obj{"type": "user", "message": obj{"role": "user", "content": []obj{{"tool_use_id": id, "type": "tool_result", "content": content, "is_error": isError}}},
		"parent_tool_use_id": nil, "session_id": c.session, "uuid": "u"}
	if c.v21 && !isError {
		// 2.1 runs the PostToolUse hooks, then reports the tool's own
		// response beside its result.
		c.mu.Lock()
		use := c.tools[id]
		hooks := c.postToolUse
		c.mu.Unlock()
		response := toolResponse(use, content)
		if len(hooks) > 0 {
			// The tool runs before its hooks do: a host that registers
			// its hook for a tool use when the assistant message comes
			// (claude-agent-acp) has it registered by then.
			time.Sleep(hookDelay)
		}
		for _, h := range hooks {
			c.hookCallback(h, id, use, response)
		}
		msg["tool_use_result"] = response
	}
	c.send(msg)
	if c.v21 {
		// 2.1 reports on the tool before the model goes on.
		c.send(obj{"type": "system", "subtype": "informational", "content": "Tool " + id + " finished", "level": "info", "session_id": c.session, "uuid": "u"})
	}
}

// result ends the turn. The turn is over before the result is written:
// the bridge may send the next user message as soon as it reads it.
func (c *cli) result(subtype string, isError bool, text string) {
	c.mu.Lock()
	c.turn = nil
	c.mu.Unlock()
	r := obj{"type": "result", "subtype": subtype, "is_error": isError, "duration_ms": 5, "num_turns": 1, "result": text,
		"session_id": c.session, "total_cost_usd": 0.00063, "usage": obj{"input_tokens": 3, "output_tokens": 5}, "permission_denials": []any{}, "uuid": "u"}
	if c.v21 {
		r["stop_reason"] = "end_turn"
		r["usage"] = obj{"input_tokens": 3, "output_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5}
		r["modelUsage"] = obj{
			"claude-sonnet-4-5": obj{"inputTokens": 3, "outputTokens": 5, "cacheReadInputTokens": 100, "cacheCreationInputTokens": 5, "costUSD": 0.0006, "contextWindow": ContextWindow, "maxOutputTokens": 64000},
			"claude-haiku-4-5":  obj{"inputTokens": 1, "outputTokens": 1, "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0, "costUSD": 0.00003, "contextWindow": 200000, "maxOutputTokens": 32000},
		}
	}
	c.send(r)
	c.sessionState("idle")
	c.mu.Lock()
	if c.turn != nil || len(c.queue) == 0 {
		c.mu.Unlock()
		return
	}
	m := c.queue[0]
	c.queue = c.queue[1:]
	t := &turn{interrupted: make(chan struct{})}
	c.turn = t
	c.mu.Unlock()
	c.take(t, m)
}

// sessionState sends session_state_changed when asked for.
func (c *cli) sessionState(state string) {
	if c.stateEvents {
		c.send(obj{"type": "system", "subtype": "session_state_changed", "state": state, "session_id": c.session, "uuid": "u"})
	}
}

// say sends one whole text message, streamed.
func (c *cli) say(msgID, text string) {
	c.streamEvent(obj{"type": "message_start", "message": obj{"id": msgID, "type": "message", "role": "assistant", "content": []any{}}})
	c.streamText(0, text)
	c.assistant(msgID, obj{"type": "text", "text": text})
	c.streamEvent(obj{"type": "message_stop"})
}

// hookDelay is how long a tool runs before its PostToolUse hooks are
// called.
const hookDelay = 200 * time.Millisecond

// toolResponse is what a 2.1 tool reports of its run, by tool.
func toolResponse(use gjson.Result, content string) obj {
	switch use.Get("name").Str {
	case "Bash":
		return obj{"stdout": content, "stderr": "", "interrupted": false, "isImage": false}
	case "Read":
		return obj{"type": "text", "file": obj{"filePath": use.Get("input.file_path").Str, "content": content, "numLines": 1, "startLine": 1, "totalLines": 1}}
	case "TodoWrite":
		return obj{"oldTodos": []any{}, "newTodos": json.RawMessage(use.Get("input.todos").Raw)}
	}
	return obj{"content": content}
}

// hookCallback calls the host's hook callback id for PostToolUse of tool
// use id and waits for its answer.
func (c *cli) hookCallback(callback, id string, use gjson.Result, response obj) {
	c.mu.Lock()
	c.next++
	rid := fmt.Sprintf("ff7f898a-0000-4000-8000-%012d", c.next)
	ch := make(chan gjson.Result, 1)
	c.answers[rid] = ch
	c.mu.Unlock()
	input := json.RawMessage(cmp.Or(use.Get("input").Raw, "{}"))
	c.send(obj{"type": "control_request", "request_id": rid, "request": obj{
		"subtype": "hook_callback", "callback_id": callback, "tool_use_id": id,
		"input": obj{"session_id": c.session, "cwd": mustCwd(), "hook_event_name": "PostToolUse",
			"tool_name": use.Get("name").Str, "tool_input": input, "tool_response": response, "tool_use_id": id},
	}})
	c.j.event("hook " + id)
	<-ch
}

// askPermission sends can_use_tool and waits for the answer (nil when the
// turn was interrupted first).
func (c *cli) askPermission(t *turn, toolID string, input obj) (gjson.Result, bool) {
	c.mu.Lock()
	c.next++
	id := fmt.Sprintf("ff7f898a-0000-4000-8000-%012d", c.next)
	ch := make(chan gjson.Result, 1)
	c.answers[id] = ch
	c.mu.Unlock()
	c.send(obj{"type": "control_request", "request_id": id, "request": obj{
		"subtype": "can_use_tool", "tool_name": "Bash", "input": input,
		"permission_suggestions": []obj{{"type": "addRules", "rules": []obj{{"toolName": "Bash", "ruleContent": input["command"]}}, "behavior": "allow", "destination": "localSettings"}},
		"decision_reason":        "This command requires approval", "tool_use_id": toolID,
	}})
	select {
	case a := <-ch:
		return a, true
	case <-t.interrupted:
		return gjson.Result{}, false
	}
}

// run plays the script for one user message, then ends the turn.
func (c *cli) run(t *turn, text string) {
	c.mu.Lock()
	mode := c.mode
	c.mu.Unlock()
	c.sessionState("running")
	c.send(obj{"type": "system", "subtype": "init", "cwd": mustCwd(), "session_id": c.session, "tools": []string{"Task", "Bash", "Read", "Edit", "Write", "TodoWrite"},
		"mcp_servers": []any{}, "model": "claude-sonnet-4-5", "permissionMode": mode, "apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": c.version, "uuid": "u"})
	if c.v21 {
		c.send(obj{"type": "rate_limit_event", "rate_limit_info": obj{"status": "allowed", "resetsAt": 1790000000}, "session_id": c.session, "uuid": "u"})
	}
	interrupted := func() {
		c.send(obj{"type": "user", "message": obj{"role": "user", "content": []obj{{"type": "text", "text": "[Request interrupted by user]"}}},
			"parent_tool_use_id": nil, "session_id": c.session, "uuid": "u"})
		c.result("error_during_execution", false, "")
	}
	switch text {
	case "list files":
		// The captured run (docs/agent-protocols.md#claude-stream-json-captured-run).
		c.streamEvent(obj{"type": "message_start", "message": obj{"id": "msg_fake", "type": "message", "role": "assistant", "content": []any{}}})
		c.streamText(0, "I'll list ", "the files.")
		c.assistant("msg_fake", obj{"type": "text", "text": "I'll list the files."})
		c.streamEvent(obj{"type": "content_block_start", "index": 1, "content_block": obj{"type": "tool_use", "id": "toolu_fake1", "name": "Bash", "input": obj{}}})
		c.streamEvent(obj{"type": "content_block_delta", "index": 1, "delta": obj{"type": "input_json_delta", "partial_json": `{"command": "ls", "description": "List files"}`}})
		c.streamEvent(obj{"type": "content_block_stop", "index": 1})
		c.assistant("msg_fake", obj{"type": "tool_use", "id": "toolu_fake1", "name": "Bash", "input": obj{"command": "ls", "description": "List files"}})
		c.streamEvent(obj{"type": "message_stop"})
		c.toolResult("toolu_fake1", ToolOutput, false)
		c.say("msg_fake2", "All done.")
		c.result("success", false, "All done.")
	case "touch":
		// Tool use ids are unique in a session, as the API makes them.
		c.mu.Lock()
		c.touches++
		id := "toolu_touch"
		if c.touches > 1 {
			id += strconv.Itoa(c.touches)
		}
		c.mu.Unlock()
		input := obj{"command": "touch made-by-tool.txt", "description": "Create file"}
		c.streamEvent(obj{"type": "message_start", "message": obj{"id": "msg_t", "type": "message", "role": "assistant", "content": []any{}}})
		c.streamEvent(obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "tool_use", "id": id, "name": "Bash", "input": obj{}}})
		c.assistant("msg_t", obj{"type": "tool_use", "id": id, "name": "Bash", "input": input})
		c.streamEvent(obj{"type": "message_stop"})
		a, ok := c.askPermission(t, id, input)
		if !ok {
			interrupted()
			return
		}
		behavior := a.Get("response.behavior").Str
		switch {
		case behavior == "allow" && a.Get("response.updatedInput.command").Str == input["command"]:
			ev := "allow"
			if a.Get("response.updatedPermissions.0.rules.0.ruleContent").Str == input["command"] {
				ev = "allow-always"
			}
			c.j.event(ev)
			if err := os.WriteFile("made-by-tool.txt", nil, 0o644); err != nil {
				c.toolResult(id, err.Error(), true)
			} else {
				c.toolResult(id, "", false)
			}
			c.say("msg_t2", "Created.")
		case behavior == "deny":
			c.j.event("deny")
			c.toolResult(id, Rejected, true)
			if a.Get("response.interrupt").Bool() {
				interrupted()
				return
			}
			c.say("msg_t2", "Not created.")
		default:
			c.j.event("violation: can_use_tool answer " + a.Raw)
		}
		c.result("success", false, "")
	case "seam":
		// The seam matrix's turn (seam_matrix_e2e_test.go).
		c.say("msg_seam1", "seam-before")
		id := "toolu_seam"
		input := obj{"command": "true", "description": "Run the seam tool"}
		c.assistant("msg_seam1", obj{"type": "tool_use", "id": id, "name": "Bash", "input": input})
		a, ok := c.askPermission(t, id, input)
		if !ok {
			interrupted()
			return
		}
		if a.Get("response.behavior").Str == "allow" {
			c.toolResult(id, "", false)
			c.say("msg_seam2", "seam-after")
		} else {
			c.toolResult(id, Rejected, true)
			c.say("msg_seam2", "seam-refused")
		}
		c.result("success", false, "")
	case "two tools":
		// Two subagents ask at once; each waits for its own answer.
		c.assistant("msg_2", obj{"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": obj{"command": "make a"}},
			obj{"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": obj{"command": "make b"}})
		var wg sync.WaitGroup
		for _, id := range []string{"toolu_a", "toolu_b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, ok := c.askPermission(t, id, obj{"command": "make " + id[len(id)-1:]})
				if !ok {
					return
				}
				c.j.event(a.Get("response.behavior").Str + " " + id)
				c.toolResult(id, "done "+id, a.Get("response.behavior").Str != "allow")
			}()
		}
		wg.Wait()
		select {
		case <-t.interrupted:
			interrupted()
		default:
			c.result("success", false, "")
		}
	case "slow":
		c.streamEvent(obj{"type": "message_start", "message": obj{"id": "msg_s", "type": "message", "role": "assistant", "content": []any{}}})
		c.streamEvent(obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "text", "text": ""}})
		c.streamEvent(obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "text_delta", "text": "Working"}})
		select {
		case <-t.interrupted:
			interrupted()
		case <-time.After(30 * time.Second):
			c.result("success", false, "")
		}
	case "crash":
		c.say("msg_c", "About to crash.")
		c.j.event("crash")
		os.Exit(3)
	case "plan":
		// Thinking, a plan (TodoWrite), a Read that needs no permission,
		// an image and a closing text, as a 2.1 turn streams them.
		todos := obj{"todos": []obj{
			{"content": "Read a.txt", "status": "in_progress", "activeForm": "Reading a.txt"},
			{"content": "Report", "status": "pending", "activeForm": "Reporting"},
		}}
		c.streamEvent(obj{"type": "message_start", "message": obj{"id": "msg_p", "type": "message", "role": "assistant", "content": []any{}}})
		c.streamEvent(obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "thinking", "thinking": "", "signature": ""}})
		c.streamEvent(obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "thinking_delta", "thinking": "Plan first, "}})
		c.streamEvent(obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "thinking_delta", "thinking": "then read."}})
		c.streamEvent(obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "signature_delta", "signature": "c2ln"}})
		c.streamEvent(obj{"type": "content_block_stop", "index": 0})
		c.assistant("msg_p", obj{"type": "thinking", "thinking": "Plan first, then read.", "signature": "c2ln"})
		c.streamEvent(obj{"type": "content_block_start", "index": 1, "content_block": obj{"type": "tool_use", "id": "toolu_todo", "name": "TodoWrite", "input": obj{}}})
		c.streamEvent(obj{"type": "content_block_stop", "index": 1})
		c.assistant("msg_p", obj{"type": "tool_use", "id": "toolu_todo", "name": "TodoWrite", "input": todos})
		c.streamEvent(obj{"type": "content_block_start", "index": 2, "content_block": obj{"type": "tool_use", "id": "toolu_read", "name": "Read", "input": obj{}}})
		c.streamEvent(obj{"type": "content_block_stop", "index": 2})
		c.assistant("msg_p", obj{"type": "tool_use", "id": "toolu_read", "name": "Read", "input": obj{"file_path": filepath.Join(mustCwd(), "a.txt")}})
		c.streamEvent(obj{"type": "message_stop"})
		c.toolResult("toolu_todo", "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress.", false)
		c.toolResult("toolu_read", "     1\thello", false)
		c.assistant("msg_p2", obj{"type": "image", "source": obj{"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
		c.say("msg_p3", "Planned.")
		c.result("success", false, "Planned.")
	case "mode":
		c.say("msg_m", "mode is "+mode)
		c.result("success", false, "")
	case "whoami":
		c.say("msg_w", fmt.Sprintf("session %s resumed %v", c.session, c.resumed))
		c.result("success", false, "")
	case "api error":
		c.send(obj{"type": "assistant", "message": obj{"id": "msg_e", "type": "message", "role": "assistant", "model": "<synthetic>",
			"content": []obj{{"type": "text", "text": APIError}}}, "parent_tool_use_id": nil, "session_id": c.session, "uuid": "u"})
		c.result("success", true, APIError)
	case "login":
		c.send(obj{"type": "assistant", "message": obj{"id": "msg_l", "type": "message", "role": "assistant", "model": "<synthetic>",
			"content": []obj{{"type": "text", "text": LoginError}}}, "parent_tool_use_id": nil, "session_id": c.session, "uuid": "u"})
		c.result("success", true, LoginError)
	default:
		c.say("msg_echo", "echo: "+text)
		c.result("success", false, "")
	}
}

func mustCwd() string {
	d, _ := os.Getwd()
	return d
}

// Journal is what one fake CLI process saw, read back by ReadJournals.
type Journal struct {
	File string
	Pid  int
	Cwd  string
	// Argv is the process's command line after the program name.
	Argv []string
	// Received and Sent hold every line read and written, in order.
	Received, Sent []string
	// Events are the script's milestones and "violation: …" entries.
	Events  []string
	Started time.Time
}

// Requests returns the received control requests with subtype.
func (j Journal) Requests(subtype string) []string {
	var out []string
	for _, l := range j.Received {
		if gjson.Get(l, "type").Str == "control_request" && gjson.Get(l, "request.subtype").Str == subtype {
			out = append(out, l)
		}
	}
	return out
}

// UserMessages returns the received user messages.
func (j Journal) UserMessages() []string {
	var out []string
	for _, l := range j.Received {
		if gjson.Get(l, "type").Str == "user" {
			out = append(out, l)
		}
	}
	return out
}

// HasEvent reports whether ev was recorded.
func (j Journal) HasEvent(ev string) bool { return slices.Contains(j.Events, ev) }

// Violations returns the events that record a broken protocol rule.
func (j Journal) Violations() []string {
	var out []string
	for _, e := range j.Events {
		if strings.HasPrefix(e, "violation: ") || strings.HasPrefix(e, "bad flags: ") {
			out = append(out, e)
		}
	}
	return out
}

type entry struct {
	Kind    string   `json:"k"`
	Line    string   `json:"l,omitempty"`
	Pid     int      `json:"pid,omitempty"`
	Cwd     string   `json:"cwd,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	Started int64    `json:"started,omitempty"`
}

type journal struct {
	mu sync.Mutex
	f  *os.File
}

func openJournal(dir string, argv []string, cwd string) (*journal, error) {
	if dir == "" {
		return nil, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("claude-%d.jsonl", os.Getpid())), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	j := &journal{f: f}
	j.write(entry{Kind: "start", Pid: os.Getpid(), Cwd: cwd, Argv: argv, Started: time.Now().UnixNano()})
	return j, nil
}

func (j *journal) write(e entry) {
	if j == nil {
		return
	}
	b, _ := json.Marshal(e)
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.f.Write(append(b, '\n'))
}

func (j *journal) received(l []byte) { j.write(entry{Kind: "recv", Line: string(l)}) }
func (j *journal) sent(l []byte)     { j.write(entry{Kind: "sent", Line: string(l)}) }
func (j *journal) event(ev string)   { j.write(entry{Kind: "event", Line: ev}) }

func (j *journal) close() {
	if j != nil {
		_ = j.f.Close()
	}
}

// ReadJournals reads every journal in dir, oldest process first. Processes
// may still be writing; an incomplete last line is ignored.
func ReadJournals(dir string) ([]Journal, error) {
	names, err := filepath.Glob(filepath.Join(dir, "claude-*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []Journal
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		j := Journal{File: name}
		for _, l := range bytes.Split(data, []byte("\n")) {
			var e entry
			if json.Unmarshal(l, &e) != nil {
				continue
			}
			switch e.Kind {
			case "start":
				j.Pid, j.Cwd, j.Argv, j.Started = e.Pid, e.Cwd, e.Argv, time.Unix(0, e.Started)
			case "recv":
				j.Received = append(j.Received, e.Line)
			case "sent":
				j.Sent = append(j.Sent, e.Line)
			case "event":
				j.Events = append(j.Events, e.Line)
			}
		}
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b Journal) int { return a.Started.Compare(b.Started) })
	return out, nil
}
