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
	// Session is set by the engine on session/new for dialects with one
	// agent link per session: the session id the engine minted for it.
	Session string
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
}

// A Translator translates one agent link. It is not safe for concurrent use:
// the engine's loop is its only caller.
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
// records describe an image format. main.go lists the dialects.
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
	// Configure decodes the dialect's own options block (nil when the config
	// has none) and returns a constructor for the translator of each link.
	Configure func(options hcl.Body) (func() Translator, hcl.Diagnostics)
}
