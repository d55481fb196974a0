// Package translate is the contract between the bridge engine and the
// dialects it speaks toward agents. A Translator is a pure state machine: the
// engine feeds it one editor message or one agent frame at a time and writes
// the outputs it returns, in order, to the editor (ACP v1) or to the agent (the
// dialect's own wire format). Translators do no I/O, start no goroutines, read
// no clocks and draw no random numbers, so every translation can be pinned by
// a golden transcript (see package translatetest).
//
// Request ids are split by hop. The editor's raw JSON-RPC ids never enter this
// package: the engine hands a translator an opaque Ref for each editor request
// and restores the raw id itself when the translator answers that Ref. Ids and
// correlation on the agent hop belong to each translator, which numbers them
// with deterministic counters. Calls a translator makes to the editor carry a
// Ref the translator chooses; the engine allocates the editor-side id and maps
// the editor's answer back to that Ref.
//
// The package is shaped like database/sql/driver: it declares what a dialect
// must provide and holds a few pure helpers shared by dialects.
package translate

import (
	"encoding/json"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Ref identifies one request across the editor hop without exposing its raw
// JSON-RPC id. For editor requests (Kind Request) the engine issues the Ref;
// for calls a translator makes to the editor (Kind Call) the translator
// chooses it, unique among that translator's outstanding calls.
type Ref uint64

// Kind says what a Msg or an Out is.
type Kind int

// Input kinds: what the engine feeds to Translator.FromEditor.
const (
	// Request is an editor request. Ref is its handle; Method and Body (the
	// raw params, nil when absent) are as the editor sent them.
	Request Kind = iota + 1
	// Notification is an editor notification: Method and Body (params).
	Notification
	// Response is the editor's answer to an earlier Call with the same Ref:
	// Body holds the raw result, or Error the raw error object.
	Response
	// CancelRequest means the editor sent $/cancel_request for the request
	// with this Ref (still pending). Ids are per hop, so the translator
	// re-issues the cancel with its own agent-hop id, or ignores it.
	CancelRequest
	// Abandon means the engine has answered the request Ref itself (request
	// timeout, or the cancel grace period of a prompt ran out). Any later
	// answer for it is dropped by the engine; the translator should forget
	// the request and may tell the agent to stop working on it.
	Abandon
	// LinkUp means the link's connection to the agent is established. It
	// comes before the first frame of the link; frames the translator
	// returned earlier were queued and are sent right after it.
	LinkUp
	// LinkDown means the link's connection is gone for good; Error holds a
	// JSON-RPC error object naming the cause. The engine has already
	// answered every editor request routed to the link; the translator
	// should forget its state and return nothing but Notes.
	LinkDown
	// Tick means time has passed: At is the current time. The engine sends
	// one after each Timer output's delay (see Timer); a translator must
	// tolerate ticks it no longer needs.
	Tick
)

// Output kinds: what a Translator returns. Reply, Fail, Notify, Call and
// CancelCall go to the editor; Frame goes to the agent.
const (
	// Reply answers the editor request Ref with Body as the raw result.
	Reply Kind = iota + 100
	// Fail answers the editor request Ref with Body as the raw JSON-RPC error
	// object ({"code":…,"message":…,"data":…}).
	Fail
	// Notify sends the editor a notification: Method with Body as params.
	Notify
	// Call sends the editor a request: Method with Body as params. Ref is the
	// translator's handle; the editor's answer comes back as a Response.
	Call
	// CancelCall sends the editor $/cancel_request for the outstanding Call
	// Ref (the agent gave up on it).
	CancelCall
	// Frame is one whole frame for the agent, in the dialect's wire format.
	Frame
	// Forward sends the editor Body, which is already one whole JSON-RPC
	// notification in ACP v1 form (a relayed session/update, say), without
	// rebuilding it. Method names it, for logs and hooks. The engine only
	// compacts it onto one line if it spans several.
	Forward
	// Timer asks the engine for a Tick after Delay. Translators keep no
	// clocks: a silence rule ("the turn ends after 2 s without a frame")
	// is a Timer output plus the At of later inputs.
	Timer
	// Note reports a decision the translator made that a user may want to
	// know about: Method is the name of a repair (see package bridge's
	// repair names, e.g. "unroutable-updates"), Body optional detail. The
	// engine counts and logs it; nothing is sent to either peer.
	Note
)

// Msg is one input to a translator.
type Msg struct {
	Kind   Kind
	Ref    Ref
	Method string
	// Body is the raw params (Request, Notification) or result (Response).
	// The translator may keep it: the engine never reuses or modifies it.
	Body json.RawMessage
	// Error is the raw error object of a failed Response.
	Error json.RawMessage
	// Session is set by the engine on session/new (and on session/load or
	// session/resume of a session it had no link for) for dialects with
	// one agent link per session: the session id the engine chose for it.
	Session string
	// At is when the engine took the input. It is the translator's only
	// clock: translators never read the time themselves.
	At time.Time
	// Frame is the editor's whole message for Request and Notification
	// inputs (nil when the engine made the input itself), and IDAt the
	// offset of the request's id in it. Like Body it is the translator's to
	// keep, and to reuse: a relay may rewrite the id in place and send the
	// frame on rather than copying a large message.
	Frame []byte
	IDAt  int
	// Grace, on a session/cancel notification and a CancelRequest, is the
	// engine's cancel grace: how long it lets the cancelled prompt run
	// before answering it cancelled itself. Zero means the engine did not
	// say.
	Grace time.Duration
}

// Out is one output of a translator. The engine writes outputs in the order
// they are returned, which is how a turn's updates reach the editor before
// its prompt response.
type Out struct {
	Kind   Kind
	Ref    Ref
	Method string
	// Body is owned by the engine once returned.
	Body json.RawMessage
	// Params, for a Forward output, is the params member within Body when
	// the translator has read it (nil otherwise): it saves the engine
	// reading Body again for the hooks that want the params alone.
	Params json.RawMessage
	// Session, when the translator knows it, is the ACP session the output
	// concerns. The engine uses it to route hooks and to drop the updates
	// of turns it already ended; it saves the engine parsing Body again.
	Session string
	// Delay is the wait of a Timer output.
	Delay time.Duration
}

// A Translator translates one agent link. It is not safe for concurrent use:
// the engine's loop is its only caller.
//
// The slice a call returns is the engine's only until the translator's next
// call: a translator may reuse its backing array (the Body of each Out stays
// the engine's for good).
//
// A translator answers every editor Request it is fed exactly once (Reply or
// Fail), immediately or later; a method it does not implement is answered
// -32601 by the translator itself. The engine forwards every method, known or
// not, so that a dialect decides what its agent supports.
type Translator interface {
	// FromEditor handles one editor message routed to this link. An error
	// is a bug or an unrecoverable state: the engine logs it, answers any
	// request in m with -32603 and keeps serving.
	FromEditor(m Msg) ([]Out, error)
	// FromAgent handles one frame read from the agent. The translator may
	// keep the frame or slices of it: the engine never reuses it. An error means the frame was unusable; the engine logs it
	// and keeps serving (the translator must already have returned any
	// answer the agent needs, e.g. a -32602 for malformed params).
	FromAgent(frame []byte) ([]Out, error)
}

// Dialect describes one backend protocol, the way image.RegisterFormat's
// records describe an image format. Package bridge/launch lists the dialects.
type Dialect struct {
	// Name is what --dialect and the config's dialect attribute select.
	Name string
	// Summary is a one-line description for `acp-bridge dialects`.
	Summary string
	// PerSession means the agent holds one conversation per connection, so
	// the engine opens one agent link per ACP session (plus one control
	// link for initialize and authenticate), mints the session id itself and
	// replays the editor's initialize on every new link before session/new.
	PerSession bool
	// Relay means the agent speaks ACP v1 itself and the translator relays
	// it: the engine keeps the agent's own agentInfo in the initialize
	// answer (the bridge identifies itself under _meta) and forwards a
	// repeated initialize to the agent instead of answering it itself.
	Relay bool
	// NoControlLink means the dialect answers connection-level requests
	// (initialize, authenticate) without an agent: the engine feeds them to
	// a translator that has no connection, and dials only per-session
	// links. Only meaningful with PerSession.
	NoControlLink bool
	// NoHistory means the agent's protocol has no chat history (a command
	// or job protocol): a new agent session opened for an existing
	// transcript (a load, a resume, a switch of agents) is not primed with
	// the transcript, which such an agent would take as commands to run.
	NoHistory bool
	// Configure decodes the dialect's own options block (nil when the config
	// has none) and returns a constructor for the translator of each link.
	Configure func(options hcl.Body) (func() Translator, hcl.Diagnostics)
	// Secrets, when set, lists the values the dialect reads from the
	// environment to send the agent (a rule profile's env() values): they
	// are secrets as the agent's configured credentials are, and every
	// sink the bridge writes scrubs them (bridge/launch's Agent.Secrets).
	Secrets func() []string
}

// Spawn is what a dialect wants a new per-session link to be: the agent's
// command line, extra environment and working directory. Empty fields mean
// the configured defaults.
type Spawn struct {
	// Argv replaces the arguments after the configured program (the
	// configured arguments are kept first when Append is true).
	Argv []string
	// Append keeps the configured arguments and appends Argv after them.
	Append bool
	// Env holds extra "KEY=value" entries for the child.
	Env []string
	// Cwd is the child's working directory; "" means the session's cwd.
	Cwd string
}

// A RuleReporter is a Translator that can say which of its rules handled
// the agent frame it was given last (a rule profile's event name, "reply
// session/prompt"), "" when none did. The engine asks after each frame
// and gives the answer to its taps, so that a trace names an agent frame
// by what it meant rather than "frame"; it changes nothing else.
type RuleReporter interface {
	MatchedRule() string
}

// An AgentClock is a Translator that wants the time of each agent frame
// (Msg.At gives it for everything else), for rules such as "the turn ends
// after 2 s without a frame". The engine calls FromAgentAt instead of
// FromAgent when a translator has it.
type AgentClock interface {
	FromAgentAt(frame []byte, at time.Time) ([]Out, error)
}

// An EnvelopeTranslator is a Translator of a JSON-RPC dialect that takes an
// agent frame already parsed by ParseEnvelope: the engine parses each frame
// in the goroutine that read it, off the loop every translator runs on, and
// calls FromAgentEnvelope instead of FromAgent with the frame, its envelope
// and ParseEnvelope's error. The result must be what FromAgent(frame) would
// have returned. env is the caller's for the call only: a translator copies
// what it keeps of it (its strings and slices share the frame's memory).
type EnvelopeTranslator interface {
	FromAgentEnvelope(frame []byte, env *Envelope, perr *Error) ([]Out, error)
}

// An UpdatePasser is a Translator that, in some states, passes a turn's
// streamed text chunks to the editor exactly as the agent wrote them. The
// engine asks it between calls; while the answer holds (until the
// translator's next call) it may hand such chunks to the editor without
// calling the translator, from the goroutine that read them (the engine's
// lent sink).
type UpdatePasser interface {
	// PassesUpdates reports whether, in the translator's present state,
	// FromAgentEnvelope of any frame whose envelope is a PlainChunk of
	// session sid would return exactly one Forward of the frame, unchanged
	// (Method "session/update", Params the envelope's, Session sid), and
	// nothing else, and would change nothing that a later call reads.
	PassesUpdates(sid string) bool
}

// PlainChunk reports whether env is a session/update notification of a
// text chunk (a user's, the agent's message or thought) read whole in the
// compact form the SDKs write (Envelope.Plain): the frames an UpdatePasser
// speaks of.
func PlainChunk(env *Envelope) bool {
	if !env.Plain || env.SessionID == "" || env.Method != "session/update" {
		return false
	}
	switch env.UpdateKind {
	case "agent_message_chunk", "agent_thought_chunk", "user_message_chunk":
		return true
	}
	return false
}

// A SpawnBuilder is a Translator that builds the command line of its own
// link from the request that opens it (session/new, or session/load and
// session/resume of a session the engine has no link for). The engine asks
// before dialing. An error fails that request with the error's text.
type SpawnBuilder interface {
	BuildSpawn(m Msg) (Spawn, error)
}

// MetaV1ClientCapabilities names where a v2 client announces the ACP v1
// client capabilities (fs, terminal) it serves although v2 has none: the
// member of _meta["acp-bridge"] in a v2 initialize's capabilities, with
// v1's shape ({"fs":{"readTextFile":true,…},"terminal":true}). A bridge that
// speaks v2 to its agent on behalf of a v1 editor puts that editor's fs and
// terminal there; a bridge that fronts a v1 agent for a v2 client announces
// them to the agent and relays the agent's calls of them to the client as
// extension methods, V1ClientMethodPrefix before the v1 name, which the
// first bridge turns back into v1's. Two bridges in a row (acp-bridge --url
// in front of acp-bridge serve) so carry the editor's file system and
// terminals across the hop between them, every line valid v2.
const MetaV1ClientCapabilities = "v1ClientCapabilities"

// V1ClientMethodPrefix starts the v2 extension method that carries a v1
// client method (fs/*, terminal/*) to a v2 client that announced it under
// MetaV1ClientCapabilities: "_acp-bridge/v1/fs/write_text_file".
const V1ClientMethodPrefix = "_acp-bridge/v1/"
