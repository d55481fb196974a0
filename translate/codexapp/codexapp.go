// Package codexapp translates ACP v1 (the editor side) to the Codex
// app-server protocol (the agent side): the JSON-RPC that Codex's own IDE
// extension speaks to `codex app-server`, without the "jsonrpc" member, one
// message per line on stdio or one per WebSocket text frame with
// `codex app-server --listen ws://HOST:PORT` (docs/agent-protocols.md#codex-app-server).
// Tested with Codex CLI 0.169.0, whose generated JSON Schema is in
// testdata/schema and whose recorded frames (testdata/frames) seed the
// golden transcripts and FuzzFromAgent.
//
// One app-server holds many threads, so one link serves every session
// (the dialect is not PerSession). The ACP session id is the Codex thread
// id: a translator that comes up on a new connection (a WebSocket redial, a
// restarted child) knows every session by its id, and session/resume or
// load of it is thread/resume.
//
// What maps to what:
//
//	ACP                              Codex app-server
//	initialize                       initialize, initialized, account/read, model/list
//	session/new                      thread/start (cwd, model, approval policy and
//	                                 sandbox of the mode, MCP servers as config)
//	session/load, session/resume     thread/resume (load replays the thread's items)
//	session/list                     thread/list
//	session/close                    thread/unsubscribe
//	session/prompt                   turn/start (text, image, resources as text)
//	session/cancel                   turn/interrupt; answered "cancelled"
//	session/set_mode, set_model,     kept, sent with the next turn/start
//	  set_config_option              (approvalPolicy, sandboxPolicy, model)
//	agent_message_chunk              item/agentMessage/delta (a message that was
//	                                 not streamed: its item/completed text)
//	agent_thought_chunk              item/reasoning/summaryTextDelta, textDelta
//	tool_call, tool_call_update      commandExecution, fileChange, mcpToolCall,
//	                                 webSearch, dynamicToolCall items: started,
//	                                 output deltas, completed
//	plan                             turn/plan/updated, plan items
//	usage_update, prompt usage       thread/tokenUsage/updated
//	session/request_permission       item/commandExecution/requestApproval,
//	                                 item/fileChange/requestApproval
//	the prompt's error               error notifications, a failed turn
//
// Choices this package makes where the protocols leave room (each pinned by
// a golden transcript):
//
//   - Modes are Codex's approval presets as codex-acp presents them:
//     read-only (on-request, read-only sandbox), auto (on-request,
//     workspace-write) and full-access (never, danger-full-access). The
//     session's current mode is the preset its thread started with; a
//     thread whose policy is no preset is shown as "auto" and runs as auto
//     from its next turn, so that what the editor shows is what runs. A
//     picked mode or model is sent with the next turn/start, the
//     app-server's own way to change them ("for this turn and subsequent
//     turns").
//   - Models are the app-server's model/list, read once after initialize,
//     by id; the thread's own model is added when the list lacks it (a
//     custom provider's model).
//   - Approvals, with codex-acp's option ids and names: allow once is
//     "accept"; allow always is "acceptForSession" when the request offers
//     it, else the execpolicy amendment Codex proposed ("don't ask again
//     for commands that start with …"), else no always option is offered;
//     reject ("No, and tell Codex what to do differently") is "cancel",
//     which stops the turn as codex-acp's "abort" does, so that the user
//     can say what to do instead; ACP's "cancelled" is "cancel" too. An
//     error answer or an option the translator did not offer is "decline"
//     (never an allow).
//   - Codex's warnings during a turn (a model without metadata, say) are
//     shown as message chunks, as codex-acp shows them. When Codex resolves
//     a request itself (serverRequest/resolved), the editor's request is
//     withdrawn.
//   - session/cancel sends turn/interrupt once the turn's id is known
//     (right away, or when turn/start answers; again at turn/started if
//     Codex refused it because the turn had not started yet), withdraws
//     the session's
//     pending permission requests ($/cancel_request) and answers Codex
//     "cancel" for each. The turn's turn/completed (interrupted) answers
//     the prompt "cancelled", whatever its status. If Codex refuses the
//     interrupt, the prompt is answered "cancelled" at once with Codex's
//     error under _meta.codex.interruptError, reported as a Note, and the
//     turn's later items are dropped.
//   - session/close during a turn answers the prompt "cancelled" at once
//     and unsubscribes the thread; the turn is interrupted as for a
//     cancel, when Codex names or starts it after the close too.
//   - Items of a turn that is no longer the session's running turn
//     (cancelled and answered, abandoned by the engine) are dropped.
//   - Tool calls still running when their turn ends are closed as failed,
//     so that no editor shows them running.
//   - Command output deltas are sent as the tool call's whole output so
//     far (tool_call_update content replaces content).
//   - A file change's diff: an added file is newText with oldText null, a
//     deleted one oldText with newText "", an update the hunks' old and new
//     lines (Codex sends a unified diff, not the files).
//   - Token usage: a usage_update (used: the last request's total tokens,
//     size: the model's context window) for each thread/tokenUsage/updated
//     of the running turn, and the prompt answer's usage is the thread's
//     total minus what it was when the turn began.
//   - Errors: a failed turn fails the prompt with Codex's error message as
//     the message, its codexErrorInfo and details in data; an
//     "unauthorized" failure is the ACP auth-required error with how to
//     log in. An error notification that Codex will retry is a Note.
//   - Login: authMethods name `codex login`; when account/read says Codex
//     needs an OpenAI login and has none, session/new fails auth-required
//     with the command to run. authenticate cannot log in for the user
//     (Codex's login is interactive or takes a key the bridge does not
//     hold): it fails with the same words.
//   - Server requests this package does not map (user input questions,
//     MCP elicitations, dynamic tool calls, the v1 approvals) are answered
//     with a JSON-RPC error that names them, so that Codex never waits.
//   - Notifications this package does not use (rate limits, thread status,
//     warnings, diffs of the whole turn…) are dropped; ones it does not
//     know are reported as Notes.
//
// Parity with codex-acp 0.16.0 (which embeds Codex's core rather than
// speaking to an app-server): tests/codex_parity_test.go plays one session
// through both against the same fake model API and compares update kinds,
// tool-call lifecycles, permission options and outcomes, stop reasons,
// modes and models; codex-acp's side is recorded in
// tests/testdata/codex-acp-0.16.0.txt (tests/testdata/record-codex-acp.sh
// records it again). The differences, and why:
//
//   - The prompt's answer carries the turn's token usage (ACP's usage, from
//     thread/tokenUsage/updated); codex-acp sends none.
//   - A command that asks for approval is shown as a tool call from the
//     start, because the app-server announces the item (item/started)
//     before it asks; codex-acp, inside Codex's core, announces it once
//     approved. A rejected command is so a tool call closed as failed,
//     where codex-acp shows none.
//   - A file change's approval also offers "always" (Codex's
//     acceptForSession for those files, which the app-server takes);
//     codex-acp offers allow once and reject.
//   - The session/new answer also carries ACP's models (from model/list),
//     besides the model config option both show.
//   - No available commands: the app-server has no slash commands to list
//     (codex-acp lists review, init, compact…).
//   - Command output is the tool call's text content: the app-server runs
//     the command itself, so there is no editor terminal to show it in.
//   - authMethods: one, which says to run `codex login` where the
//     app-server runs; codex-acp lists ChatGPT login and the CODEX_API_KEY
//     and OPENAI_API_KEY variables, which it can apply inside its own
//     process. The bridge holds no key and cannot open a browser for the
//     app-server's machine, so authenticate fails with the command to run.
package codexapp

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/acp-bridge/acp-bridge/translate"
)

// DefaultExecutable is the program run when no command is configured.
const DefaultExecutable = "codex"

// Dialect is the codex-app-server dialect. Its options block:
//
//	model = "gpt-5-codex"   # the model of new threads (default: Codex's config)
//	mode  = "auto"          # the mode of new threads: read-only, auto or full-access
//	                        # (default: Codex's config decides)
var Dialect = translate.Dialect{
	Name:      "codex-app-server",
	Summary:   "Codex through its app-server protocol (codex app-server), as a child or over WebSocket; one app-server holds every session",
	Configure: configure,
}

// Options are the decoded options block.
type Options struct {
	Model string `hcl:"model,optional"`
	Mode  string `hcl:"mode,optional"`
}

func configure(body hcl.Body) (func() translate.Translator, hcl.Diagnostics) {
	var o Options
	if body != nil {
		diags := hcldecode.DecodeBody(body, nil, &o)
		if diags.HasErrors() {
			return nil, diags
		}
		if o.Mode != "" && findMode(o.Mode) == nil {
			attrs, _ := body.JustAttributes()
			var subject *hcl.Range
			if a, ok := attrs["mode"]; ok {
				subject = a.Expr.Range().Ptr()
			}
			return nil, append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid mode",
				Detail:   fmt.Sprintf("mode must be read-only, auto or full-access, not %q.", o.Mode),
				Subject:  subject,
			})
		}
	}
	return func() translate.Translator { return newTranslator(o) }, nil
}

// preset is one of Codex's approval presets, shown as an ACP mode.
type preset struct {
	id, name, description string
	approval              string // AskForApproval
	sandbox               string // SandboxMode (thread/start)
	sandboxType           string // SandboxPolicy type (turn/start)
}

var presets = []preset{
	{"read-only", "Read Only", "Codex can read files in the current workspace. Approval is required to edit files or access the internet.", "on-request", "read-only", "readOnly"},
	{"auto", "Default", "Codex can read and edit files in the current workspace, and run commands. Approval is required to access the internet or edit other files. (Identical to Agent mode)", "on-request", "workspace-write", "workspaceWrite"},
	{"full-access", "Full Access", "Codex can edit files outside this workspace and access the internet without asking for approval. Exercise caution when using.", "never", "danger-full-access", "dangerFullAccess"},
}

func findMode(id string) *preset {
	for i := range presets {
		if presets[i].id == id {
			return &presets[i]
		}
	}
	return nil
}

// modeOf is the preset of a thread's approval policy and sandbox type
// ("" when none matches).
func modeOf(approval, sandboxType string) string {
	for _, p := range presets {
		if p.approval == approval && p.sandboxType == sandboxType {
			return p.id
		}
	}
	return ""
}

// model is one entry of the app-server's model list.
type model struct {
	id, name, description string
}

// reqKind says what a request the translator sent the app-server was for.
type reqKind int

const (
	reqInitialize reqKind = iota + 1
	reqAccount
	reqModels
	reqThreadStart
	reqThreadResume
	reqThreadList
	reqUnsubscribe
	reqTurnStart
	reqInterrupt
)

// agentReq is one request to the app-server awaiting its answer.
type agentReq struct {
	kind    reqKind
	ref     translate.Ref // the editor request it answers (0: none)
	session string
	method  string // the editor's method (session/load or session/resume)
	turn    *turn
}

// approval is one outstanding session/request_permission.
type approval struct {
	agentID json.RawMessage // the app-server's request id
	session string
	turn    *turn
	always  json.RawMessage // the decision "allow always" sends (nil: not offered)
	// alwaysID is the option id of "allow always".
	alwaysID string
}

// tool is what the translator knows of one tool item.
type tool struct {
	kind, title string
	output      strings.Builder
	done        bool
}

// turn is one prompt and the Codex turn that runs it.
type turn struct {
	ref       translate.Ref
	id        string // Codex's turn id, once known
	cancelled bool
	interrupt bool // turn/interrupt sent
	started   bool // turn/started seen
	tools     map[string]*tool
	order     []string // tool ids in announcement order
	streamed  map[string]bool
	base      usage // the thread's total when the turn began
	errObj    json.RawMessage
}

type usage struct {
	input, cached, output, reasoning, total int64
}

// session is one ACP session: a Codex thread.
type session struct {
	id, cwd string
	mode    string // current mode id
	model   string
	// modeSent and modelSent say the thread already runs with them; a
	// change is sent with the next turn/start.
	modeSent, modelSent bool
	turn                *turn
	dropped             map[string]bool // turn ids whose items are dropped
	// retry is an abandoned turn whose interrupt Codex refused before the
	// turn started: the interrupt goes again at its turn/started.
	retry  *turn
	total  usage
	window int64
}

// translator is one connection to an app-server.
type translator struct {
	opts Options

	nextID  int64
	reqs    map[int64]*agentReq
	calls   translate.Calls[*approval]
	initRef translate.Ref
	// initWait counts the answers initialize still waits for.
	initWait  int
	initDone  bool
	userAgent string
	needsAuth bool
	models    []model

	sessions map[string]*session
	// closing are sessions the editor closed during a turn Codex had not
	// yet named or started: the turn's interrupt still needs them (its id
	// comes with turn/start's answer, a refused interrupt goes again at
	// turn/started). They leave once the interrupt is accepted, or at the
	// turn's end (turn/completed, or turn/start refused).
	closing map[string]*session
}

func newTranslator(o Options) *translator {
	return &translator{
		opts:     o,
		reqs:     make(map[int64]*agentReq),
		calls:    translate.Calls[*approval]{Dialect: "codex-app-server"},
		sessions: make(map[string]*session),
		closing:  make(map[string]*session),
	}
}

// agentSession is the session thread id names for what Codex sends: an
// open one, or one closed while Codex had not yet named or started its
// turn.
func (t *translator) agentSession(id string) *session {
	if s := t.sessions[id]; s != nil {
		return s
	}
	return t.closing[id]
}

// --- output helpers -------------------------------------------------------------

func marshal(v any) json.RawMessage {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(strings.TrimSuffix(b.String(), "\n"))
}

func reply(ref translate.Ref, result any) translate.Out {
	return translate.Out{Kind: translate.Reply, Ref: ref, Body: marshal(result)}
}

func fail(ref translate.Ref, errObj json.RawMessage) translate.Out {
	return translate.Out{Kind: translate.Fail, Ref: ref, Body: errObj}
}

func failf(ref translate.Ref, code int, format string, args ...any) translate.Out {
	return fail(ref, translate.Errorf(code, format, args...).JSON())
}

// Note names (see translate.Note).
const (
	noteIgnored          = "codex-ignored"
	noteInterruptRefused = "codex-interrupt-refused"
	noteRetry            = "codex-retrying"
)

func note(name, detail string) translate.Out {
	return translate.Out{Kind: translate.Note, Method: name, Body: marshal(detail)}
}

// update builds a session/update notification.
func update(sessionID string, u any) translate.Out {
	return translate.Out{Kind: translate.Notify, Method: "session/update", Session: sessionID, Body: marshal(struct {
		SessionID string `json:"sessionId"`
		Update    any    `json:"update"`
	}{sessionID, u})}
}

// request sends the app-server a request (no "jsonrpc" member) and
// remembers what it is for.
func (t *translator) request(method string, params any, r *agentReq) translate.Out {
	t.nextID++
	t.reqs[t.nextID] = r
	return translate.Out{Kind: translate.Frame, Body: marshal(struct {
		ID     int64  `json:"id"`
		Method string `json:"method"`
		Params any    `json:"params"`
	}{t.nextID, method, params})}
}

// notification sends the app-server a notification.
func notification(method string) translate.Out {
	return translate.Out{Kind: translate.Frame, Body: marshal(struct {
		Method string `json:"method"`
	}{method})}
}

// answer answers the app-server's request id with result.
func answer(id json.RawMessage, result any) translate.Out {
	return translate.Out{Kind: translate.Frame, Body: marshal(struct {
		ID     json.RawMessage `json:"id"`
		Result any             `json:"result"`
	}{id, result})}
}

// answerError answers the app-server's request id with an error.
func answerError(id json.RawMessage, code int, message string) translate.Out {
	return translate.Out{Kind: translate.Frame, Body: marshal(struct {
		ID    json.RawMessage `json:"id"`
		Error any             `json:"error"`
	}{id, map[string]any{"code": code, "message": message}})}
}

// loginHint says how to log Codex in.
const loginHint = "run `codex login` (or `codex login --with-api-key`) as the user and on the machine where `codex app-server` runs, then try again"
