// Package claude translates ACP v1 (the editor side) to Claude Code's
// stream-json input/output and its control protocol (the agent side): the
// protocol the Claude Agent SDKs speak to the `claude` CLI
// (docs/agent-protocols.md#claude-stream-json). The reference for the ACP it
// produces is what the adapter editors ship, claude-agent-acp 0.23.1 (on the
// Claude Agent SDK), shows the editor for the same CLI session; before it,
// claude-code-acp 0.16.2 (docs/agent-protocols.md#claude-stream-json-mapping).
// The golden transcripts in testdata replay the captured CLI frames
// (docs/agent-protocols.md#claude-stream-json-captured-run) and Claude Code
// 2.1 shapes and pin that output; tests/claude_parity_test.go holds the bridge
// to the adapter's recorded output. Tested with Claude Code 2.0.77 and
// 2.1.332.
//
// What maps, side by side with claude-agent-acp 0.23.1:
//
//	editor sees                     bridge                     claude-agent-acp
//	tool call lifecycle             tool_call, then updates    same
//	tool titles, kinds, content     same rules                 tools.ts
//	usage_update (used/size/cost)   at each turn's result      same
//	prompt answer usage             from the result            summed over results
//	models, set_model, option       from the CLI's list;       same
//	                                current = first unless
//	                                model is configured
//	modes                           5, always                  5; bypass hidden as root
//	available commands              filtered, mcp: names       same
//	plan (TodoWrite)                plan updates               same
//	thoughts, images                chunks                     same
//	permission options, outcomes    same ids and answers       same
//	ExitPlanMode options            4 when the CLI allows      4 when not root
//	                                bypass, else 3
//	compaction, local command out   message chunks             same
//	/context… (output in result)    message chunk              same
//	session/load history            the bridge's store (same   read from CLI files
//	                                kinds, before the answer)
//	resume, close                   yes                        yes (also fork, list)
//	PostToolUse hook updates        from tool_use_result       toolResponse in _meta,
//	                                (same updates)             Edit's patch as diff
//	terminal_output _meta (Bash)    no                         when the editor asks
//	prompt queueing                 queued, promptQueueing     same
//	subagent text and thoughts      hidden                     streamed ones shown
//	subagent tool calls             parentToolUseId in _meta   same
//
// Not mapped, and why: history replay needs the CLI's session files, which
// a pure translator cannot read (the bridge's session store replays
// instead); the bypassPermissions mode needs the
// CLI started with --allow-dangerously-skip-permissions, which the dialect
// does not add (extra_args can; ExitPlanMode then offers the bypass option
// first, as the adapter does), so otherwise the CLI refuses the switch with
// its own reason.
//
// One CLI process holds one conversation, so the engine starts one process
// per ACP session (Dialect.PerSession) and answers initialize and
// authenticate without any process (Dialect.NoControlLink). The translator
// builds the process's command line itself (translate.SpawnBuilder): the
// configured program and its arguments, then the stream-json flags, the
// session's model, permission mode, MCP servers and directories, and the
// options block's extra arguments.
//
// Choices this package makes where the protocols leave room (each pinned by
// a golden transcript):
//
//   - The ACP session id is the one the engine mints. The CLI gets a UUID
//     derived from it (SessionUUID, a UUIDv5-style SHA-1 hash) as
//     --session-id, so session/load and session/resume of the same ACP id
//     find the same CLI session with --resume; an ACP id that already is a
//     UUID is passed as it is.
//   - session/new, load and resume send the control initialize and are
//     answered when the CLI acknowledges it: a CLI that cannot start fails
//     the request that opened it rather than the first prompt.
//   - Control requests to the CLI are numbered req_1, req_2… per process, as
//     the SDKs number them.
//   - Streaming: text and thinking deltas become message and thought
//     chunks; the CLI's aggregate assistant message for a block that was
//     streamed is dropped, one that was not is sent whole. Text and thinking
//     of subagents (parent_tool_use_id set) are not shown: the Task tool's
//     result carries what the subagent found. Their tool calls are shown,
//     since they may ask for permission, marked with the Task's tool use
//     in _meta.claudeCode.parentToolUseId as claude-agent-acp marks them.
//   - Tool calls are announced as the reference does: a pending tool_call
//     with empty rawInput when the block starts streaming, then a
//     tool_call_update with the full input once the CLI has it (never a
//     second tool_call with the same id). TodoWrite is shown as a plan,
//     never as a tool call.
//   - A turn whose main agent reported usage ends with a usage_update:
//     the last assistant message's input, output and cache tokens, the
//     smallest context window among the result's models (200000 when it
//     names none) and the CLI's total_cost_usd in USD. The prompt answer
//     carries the result's token usage (unstable usage) and, under
//     _meta.claudeCode, the CLI's usage, cost and timings.
//   - Nothing depends on the order of system, rate-limit, progress or
//     keep-alive messages within a turn: Claude Code 2.1 sends a system
//     message after a tool result, where 2.0 went on to the assistant.
//     Tool calls still without a result when the turn ends are closed as
//     failed, so that no editor shows them running.
//   - The adapter's PostToolUse hook is not registered: the same update is
//     made from the tool result's user message, whose tool_use_result is
//     the response the CLI hands the hook, and sent where the hook's would
//     come, before the completed tool_call_update. A failed tool has none.
//   - Permissions: every can_use_tool becomes its own
//     session/request_permission, whatever else is pending, with the
//     reference's options (always allow, allow, reject; for ExitPlanMode
//     the mode to continue in). "Always" echoes the CLI's suggestions as
//     updatedPermissions, or a session rule for the tool when it made none.
//     An answer the translator did not offer, an error answer and an
//     unknown outcome deny the tool (never allow it); "cancelled" denies it
//     with interrupt.
//   - session/cancel sends the CLI an interrupt, withdraws the editor's
//     pending permission requests ($/cancel_request) and denies them toward
//     the CLI at once, so neither side waits on the other; the turn's
//     result then answers the prompt "cancelled", whatever its subtype.
//   - A second session/prompt while one runs is queued, as
//     claude-agent-acp queues it (and says so, promptQueueing in the
//     initialize answer's _meta.claudeCode, so that the engine's one-turn
//     rule lets it through): it goes to the CLI at once with a uuid, which
//     the CLI echoes (--replay-user-messages) when it takes the message.
//     The running prompt is answered by its result, and the queued one's
//     turn follows; if the echo comes first (the CLI took the message into
//     the running turn) the running prompt is answered end_turn there, and
//     the rest of the turn is the queued prompt's. session/cancel answers
//     queued prompts "cancelled" (claude-agent-acp at once; here right
//     after the running prompt, so that no later prompt ends first); a
//     turn the CLI starts for one of them is interrupted and dropped. A prompt sent after the engine abandoned the
//     running one (its cancel grace ran out) waits behind it: the abandoned
//     turn's output and result are dropped.
//   - This translator does not replay history on session/load (the CLI
//     keeps it and has no way to print it): the session is resumed and
//     the answer comes without replay, reported as a Note. With the
//     bridge's session store on (the default), the engine replays the
//     transcript it kept before it asks for the load (bridge/durable.go).
//     A load or resume of a session whose CLI runs here already is
//     answered from it.
//   - authenticate cannot log in (Claude Code's login is interactive, in
//     the CLI): it fails with the command to run. A turn that fails for
//     want of a login fails with the ACP auth-required error.
//   - Message kinds and system subtypes this package does not know (newer
//     CLIs add them) are reported as Notes and otherwise ignored.
package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/hashicorp/hcl/v2"

	"github.com/acp-bridge/acp-bridge/translate"
)

// DefaultExecutable is the program run when no command is configured.
const DefaultExecutable = "claude"

// Dialect is the claude-stream-json dialect. Its options block:
//
//	model           = "sonnet"      # --model and the model option's initial value
//	permission_mode = "default"     # --permission-mode: default, acceptEdits, plan, dontAsk, bypassPermissions
//	models          = ["sonnet"]    # model choices offered until the CLI names its own
//	extra_args      = ["--max-turns", "20"]   # appended to every CLI command line
var Dialect = translate.Dialect{
	Name:          "claude-stream-json",
	Summary:       "Claude Code CLI through stream-json and its control protocol (claude-agent-acp parity), one CLI process per session",
	PerSession:    true,
	NoControlLink: true,
	Configure:     configure,
}

// Options are the decoded options block.
type Options struct {
	Model          string   `hcl:"model,optional"`
	PermissionMode string   `hcl:"permission_mode,optional"`
	Models         []string `hcl:"models,optional"`
	ExtraArgs      []string `hcl:"extra_args,optional"`
}

// modes are the CLI's permission modes, in the order and with the names
// claude-agent-acp 0.23.1 shows them (the CLI's --permission-mode).
// dontAsk (Claude Code 2.1) denies what no rule allows instead of asking.
var modes = []struct{ id, name, description string }{
	{"default", "Default", "Standard behavior, prompts for dangerous operations"},
	{"acceptEdits", "Accept Edits", "Auto-accept file edit operations"},
	{"plan", "Plan Mode", "Planning mode, no actual tool execution"},
	{"dontAsk", "Don't Ask", "Don't prompt for permissions, deny if not pre-approved"},
	{"bypassPermissions", "Bypass Permissions", "Bypass all permission checks"},
}

// modeList names the modes for error messages: "default, acceptEdits, …
// and bypassPermissions".
func modeList() string {
	ids := make([]string, len(modes))
	for i, m := range modes {
		ids[i] = m.id
	}
	return strings.Join(ids[:len(ids)-1], ", ") + " and " + ids[len(ids)-1]
}

func isMode(id string) bool {
	return slices.ContainsFunc(modes, func(m struct{ id, name, description string }) bool { return m.id == id })
}

// defaultModels are the choices of the model option until the CLI's
// initialize answer lists its own: the aliases every CLI accepts.
var defaultModels = []modelInfo{
	{Value: "default", Name: "Default", Description: "The model Claude Code picks for this account"},
	{Value: "sonnet", Name: "Sonnet"},
	{Value: "opus", Name: "Opus"},
	{Value: "haiku", Name: "Haiku"},
}

func configure(body hcl.Body) (func() translate.Translator, hcl.Diagnostics) {
	var o Options
	if body != nil {
		diags := hcldecode.DecodeBody(body, nil, &o)
		if diags.HasErrors() {
			return nil, diags
		}
		if o.PermissionMode != "" && !isMode(o.PermissionMode) {
			attrs, _ := body.JustAttributes()
			var subject *hcl.Range
			if a, ok := attrs["permission_mode"]; ok {
				subject = a.Expr.Range().Ptr()
			}
			return nil, append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid permission_mode",
				Detail:   fmt.Sprintf("permission_mode must be one of %s, not %q.", modeList(), o.PermissionMode),
				Subject:  subject,
			})
		}
	}
	return func() translate.Translator { return newTranslator(o) }, nil
}

type modelInfo struct {
	Value       string `json:"value"`
	Name        string `json:"displayName"`
	Description string `json:"description,omitempty"`
}

// ctlKind says what a control request the translator sent the CLI was for.
type ctlKind int

const (
	ctlInitialize ctlKind = iota + 1
	ctlInterrupt
	ctlSetMode
	ctlSetModel
)

// ctlRequest is one control request awaiting the CLI's control_response.
type ctlRequest struct {
	kind ctlKind
	ref  translate.Ref // the editor request it answers (0 for none)
	// method is the editor method that asked (set_mode, set_config_option
	// or set_model); value the mode or model asked for.
	method, value string
}

type reopen struct {
	ref    translate.Ref
	method string
}

// permission is one outstanding session/request_permission.
type permission struct {
	requestID string          // the CLI's control request_id
	toolID    string          // the ACP toolCallId
	toolName  string          // the CLI's tool name
	input     json.RawMessage // the tool input to echo back as updatedInput
	// suggestions are the CLI's permission_suggestions, echoed back as
	// updatedPermissions when the user allows always.
	suggestions json.RawMessage
	// exitPlan marks ExitPlanMode, whose options are modes.
	exitPlan bool
	// bypass says the ExitPlanMode options included bypassPermissions.
	bypass bool
}

// tool is what the translator knows of one tool use.
type tool struct {
	name      string
	input     json.RawMessage
	announced bool   // a tool_call reached the editor
	seq       uint64 // announcement order
	plan      bool   // TodoWrite: shown as a plan, results dropped
	parent    string // the Task's tool use, for a subagent's tool
}

// turn is the running prompt.
type turn struct {
	ref       translate.Ref
	cancelled bool // session/cancel or $/cancel_request seen: interrupt sent
	abandoned bool // the engine answered it itself: no answer from here
	// withheld are the texts of synthetic assistant messages ("API Error:
	// …"): the prompt's error if the turn fails, else shown at its end.
	withheld []string
	// contextUsed is the context the last assistant message of the main
	// agent filled (input, output and cache tokens), reported in a
	// usage_update when the turn ends; haveContext says one was seen.
	contextUsed int64
	haveContext bool
	// local marks a prompt that is a command the CLI answers itself,
	// without the model (/context): its result's text is the output.
	local bool
	// uuid is the prompt message's uuid, which the CLI echoes
	// (--replay-user-messages) when it takes the message.
	uuid string
}

// stream is the streaming state of the assistant message being received (drop
// the aggregate of streamed blocks,
// docs/agent-protocols.md#deltas-and-aggregates).
type stream struct {
	msgID string
	// seen holds the block indexes whose first delta was counted.
	seen map[int]bool
	// text and thinking count the streamed blocks of each kind; the used
	// counts, how many of them an aggregate assistant message matched.
	text, thinking, usedText, usedThinking int
}

func (s *stream) reset(msgID string) {
	*s = stream{msgID: msgID, seen: map[int]bool{}}
}

// openState tracks the request that opened the session.
type openState int

const (
	openNone    openState = iota // no session/new, load or resume yet
	openPending                  // control initialize sent, not acknowledged
	openDone
	openFailed
)

// translator is one CLI process (or, on the engine's detached control link,
// none). The zero value is not usable; see newTranslator.
type translator struct {
	opts Options

	session  string // the ACP session id; "" until a session is opened
	cwd      string
	open     openState
	openRef  translate.Ref
	openKind string // "session/new", "session/load" or "session/resume"
	openErr  json.RawMessage
	// reopens are session/load and resume requests for this session that
	// came while it was starting; they are answered with openRef.
	reopens []reopen
	closed  bool

	mode   string
	model  string
	models []modelInfo

	nextCtl uint64
	ctl     map[string]*ctlRequest

	// perms are the permission requests to the editor still waiting for
	// its answer.
	perms translate.Calls[*permission]

	turn *turn
	// staleTurns counts abandoned turns the CLI has not ended yet, whose
	// results come before the running turn's.
	staleTurns int
	// queue holds the prompts sent while another ran, in order: the CLI
	// has them and takes each when its echo comes or the turn before ends.
	queue []*turn
	// dropped holds the uuids of queued prompts answered "cancelled"
	// before the CLI took them; a turn the CLI starts for one is
	// interrupted and its output dropped.
	dropped map[string]bool
	// prompts counts the prompts sent, for their uuids.
	prompts  int
	tools    map[string]*tool
	nextTool uint64
	stream   stream
}

func newTranslator(o Options) *translator {
	t := &translator{
		opts:    o,
		mode:    o.PermissionMode,
		model:   o.Model,
		ctl:     make(map[string]*ctlRequest),
		perms:   translate.Calls[*permission]{Dialect: "claude"},
		dropped: make(map[string]bool),
		tools:   make(map[string]*tool),
	}
	if t.mode == "" {
		t.mode = "default"
	}
	if t.model == "" {
		t.model = "default"
	}
	for _, m := range o.Models {
		t.models = append(t.models, modelInfo{Value: m, Name: m})
	}
	if len(t.models) == 0 {
		t.models = slices.Clone(defaultModels)
	}
	t.ensureModel()
	t.stream.reset("")
	return t
}

// ensureModel adds the current model to the choices when it is not one.
func (t *translator) ensureModel() {
	if !slices.ContainsFunc(t.models, func(m modelInfo) bool { return m.Value == t.model }) {
		t.models = append(t.models, modelInfo{Value: t.model, Name: t.model})
	}
}

// --- output helpers -------------------------------------------------------------

func reply(ref translate.Ref, result any) translate.Out {
	return translate.Out{Kind: translate.Reply, Ref: ref, Body: marshal(result)}
}

func fail(ref translate.Ref, errObj json.RawMessage) translate.Out {
	return translate.Out{Kind: translate.Fail, Ref: ref, Body: errObj}
}

func failf(ref translate.Ref, code int, format string, args ...any) translate.Out {
	return fail(ref, translate.Errorf(code, format, args...).JSON())
}

func note(detail string) translate.Out {
	return translate.Out{Kind: translate.Note, Method: noteIgnored, Body: json.RawMessage(detail)}
}

// Note names (see translate.Note).
const (
	// noteIgnored: a CLI message this package does not know was ignored.
	noteIgnored = "claude-ignored"
	// noteNoReplay: session/load answered without replaying history.
	noteNoReplay = "claude-load-without-replay"
)

// update builds a session/update notification for this session.
func (t *translator) update(u any) translate.Out {
	return translate.Out{Kind: translate.Notify, Method: "session/update", Session: t.session, Body: marshal(struct {
		SessionID string `json:"sessionId"`
		Update    any    `json:"update"`
	}{t.session, u})}
}

// frame builds one stream-json line for the CLI.
func frame(v any) translate.Out {
	return translate.Out{Kind: translate.Frame, Body: marshal(v)}
}

// controlRequest returns the frame of a new control request and records it.
func (t *translator) controlRequest(c *ctlRequest, request any) translate.Out {
	t.nextCtl++
	id := fmt.Sprintf("req_%d", t.nextCtl)
	t.ctl[id] = c
	return frame(struct {
		Type      string `json:"type"`
		RequestID string `json:"request_id"`
		Request   any    `json:"request"`
	}{"control_request", id, request})
}

// controlSuccess answers one of the CLI's control requests.
func controlSuccess(requestID string, response any) translate.Out {
	type body struct {
		Subtype   string `json:"subtype"`
		RequestID string `json:"request_id"`
		Response  any    `json:"response"`
	}
	return frame(struct {
		Type     string `json:"type"`
		Response body   `json:"response"`
	}{"control_response", body{"success", requestID, response}})
}

// controlError refuses one of the CLI's control requests.
func controlError(requestID, why string) translate.Out {
	type body struct {
		Subtype   string `json:"subtype"`
		RequestID string `json:"request_id"`
		Error     string `json:"error"`
	}
	return frame(struct {
		Type     string `json:"type"`
		Response body   `json:"response"`
	}{"control_response", body{"error", requestID, why}})
}

// marshal encodes v without HTML escaping (prompts and tool output carry <,
// > and & verbatim) and without the trailing newline. The types passed in
// always encode; an error would be a bug, answered as JSON null.
func marshal(v any) json.RawMessage {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(strings.TrimSuffix(b.String(), "\n"))
}

// compactJSON returns a copy of raw on one line, or nil when it is not JSON.
func compactJSON(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return nil
	}
	return b.Bytes()
}
