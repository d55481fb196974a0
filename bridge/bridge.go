// Package bridge is the engine of acp-bridge. It serves one editor over
// newline-delimited ACP v1 on stdio and relays it to one or more agent links
// through a dialect's translator. The engine alone sees the editor's request
// ids and restores them exactly; it owns sessions, the order of everything
// written to the editor, request timeouts, the cancel grace period, the
// links' supervision (a lost link is dialled again for the next request that
// needs it) and the rule that every editor request gets exactly one answer,
// even when an agent dies or a connection drops.
//
// The engine is one loop goroutine that owns every translator, session and
// pending table (engine.go); the editor's input and output and each link's
// connection have goroutines of their own that hand whole messages to the
// loop and take them from it (editor.go, links.go). While the loop waits it
// may lend a streaming turn's sink to that turn's link, whose reader then
// handles the turn's text chunks with the loop's own code until the loop
// takes the sink back (lend.go): the engine's code never runs on two
// goroutines at once.
//
// The loop's state is divided by concern, each part loop-owned: the core
// (engine.go, fromeditor.go, fromagent.go: routing, the request table,
// initialize, cancel, one turn at a time, deadlines), durable sessions
// (durableSessions: durable.go, durableopen.go, durableattach.go,
// history.go, switch.go; it reaches the core through sessionHooks alone),
// editors that speak ACP v2 (v2editor: v2relay.go, v2front.go; through
// v2Hooks alone) and link supervision (supervisor: supervise.go; through
// linkHooks alone). The parts never name the engine type; each one's
// interface, beside its type, says what the core promises it.
package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/go-hclog"
)

// A Link carries whole frames to and from one agent. legacy.WSConn and
// legacy.Process satisfy it.
type Link interface {
	// Read returns the next frame, owned by the caller. It returns an error
	// (io.EOF or one naming the cause) once the agent is gone.
	Read(ctx context.Context) ([]byte, error)
	// Write sends one frame. The engine calls it from one goroutine only.
	Write(ctx context.Context, frame []byte) error
	// Close releases the link and unblocks Read. Safe to call more than once.
	Close() error
}

// Spawn says what a new agent link is for.
type Spawn struct {
	// Cwd is the session's working directory (session/new's cwd); empty for
	// the control link, which runs where the bridge runs.
	Cwd string
	// Session is the id of the session the link serves; empty for the
	// control link.
	Session string
	// Command is what the dialect asked for the link's agent process (see
	// translate.SpawnBuilder); its zero value means the configured command.
	Command translate.Spawn
}

// Bridge serves one editor. Dialect, NewTranslator and Dial are required;
// every other field's zero value means the default its comment gives.
// Fields must not be changed once Serve has started.
//
// The func fields are hooks in the manner of httputil.ReverseProxy: each is
// called on the engine's loop goroutine (or on the link reader the loop has
// lent its sink to, never on two goroutines at once, see lend.go), must
// return quickly, must not block on either peer and must not keep the
// slices it is handed.
type Bridge struct {
	// Dialect describes the agent's protocol.
	Dialect translate.Dialect
	// NewTranslator makes the translator of each agent link (from
	// Dialect.Configure).
	NewTranslator func() translate.Translator
	// Dial opens an agent link. It may block (a WebSocket handshake); the
	// engine calls it off its loop, with a ctx cancelled when the bridge
	// stops or no longer needs the link.
	Dial func(ctx context.Context, s Spawn) (Link, error)
	// AgentName names the configured agent in logs, errors and the
	// initialize answer's _meta.
	AgentName string
	// Version is the bridge's version, reported in the initialize answer.
	Version string
	// Logger receives the engine's logs; nil means no logging.
	Logger hclog.Logger
	// MaxMessage is the largest editor message accepted, in bytes; 0 means
	// 64 MiB. A longer line is answered with an error and skipped.
	MaxMessage int
	// RequestTimeout bounds every editor request except session/prompt and
	// authenticate (a model's turn, a browser login); 0 means 60 s,
	// negative means no timeout.
	RequestTimeout time.Duration
	// CancelGrace is how long after session/cancel the engine waits for the
	// agent to end each cancelled turn before answering its prompt itself
	// with stopReason "cancelled"; 0 means 5 s.
	CancelGrace time.Duration
	// QueueBytes bounds each queue of messages waiting for a slow peer:
	// frames for one agent link, agent frames for the loop, messages for
	// the editor. When one is full the engine stops reading from the side
	// that fills it (backpressure) instead of growing; 0 means 1 MiB. A
	// single message larger than the bound still passes, alone.
	QueueBytes int
	// ReconnectBackoff is the wait before dialling an agent again after a
	// failed dial; it doubles with every further failure, up to
	// ReconnectBackoffMax, with ±20% jitter. 0 means 100 ms and 5 s.
	ReconnectBackoff, ReconnectBackoffMax time.Duration

	// Tap, if not nil, sees every message on both hops, in the order the
	// engine handles them, and the engine's own decisions (see TapEvent).
	Tap func(TapEvent)
	// OnNote, if not nil, sees the engine's own decisions, the BridgeHop
	// events Tap sees too, and nothing else. A hook that only counts
	// repairs belongs here: a Tap, however little it does, makes the
	// engine hand it every message on both hops, and put each message to
	// the editor in one piece for it, a copy of every relayed answer.
	OnNote func(TapEvent)
	// OnSession, if not nil, is told of every session's life and of every
	// message the editor saw for it (see SessionEvent): the hook a
	// transcript store is built on.
	OnSession func(SessionEvent)
	// NewSessionID, if not nil, picks the ids of sessions the engine
	// creates itself (dialects with one link per session); nil means
	// random "sess-" ids. Tests make it deterministic.
	NewSessionID func() string
	// Redact, if not nil, is applied to every message the engine sends
	// the editor (answers, errors, session/update, the agent's requests)
	// before the tap and the trace-level log see it: it removes secret
	// values an agent or a child may have echoed. It returns its argument
	// when there is nothing to remove, and never writes to it.
	Redact func([]byte) []byte
	// BindSession, if not nil, may pick another agent for a new session:
	// it is asked on session/new, and on session/load and session/resume
	// of a session the engine has no link for, with the request's params.
	// A Binding it returns gets a link of its own for that session (its
	// dialect's initialize replayed first); ok false keeps the Bridge's own
	// Dialect, NewTranslator and Dial. This is the seam for switching
	// agents per session.
	BindSession func(method string, params []byte) (b Binding, ok bool)

	// EditorProtocol forces the ACP version spoken to the editor: 1, or 2
	// (a v2front.Front in front of the engine). 0 lets the editor's first
	// initialize choose (see chooseFront).
	EditorProtocol int

	// OneTurn says what happens to a prompt for a session whose turn is
	// still running; the zero value rejects it (see OneTurnMode).
	OneTurn OneTurnMode
	// DisabledRepairs switches off the engine's own repairs by name (the
	// compliance shim's switches); nil means all on.
	DisabledRepairs map[Repair]bool

	// serving is the engine while Serve runs, for Note.
	serving atomic.Pointer[engine]
	// noLend keeps the loop from lending its sink (lend.go): tests compare
	// the two ways a turn's chunks can take. lentChunks counts the frames
	// handled under a lease.
	noLend     bool
	lentChunks atomic.Int64

	// Sessions, if not nil, turns on durable sessions (durable.go): the
	// bridge records every session and serves session/list, load, resume,
	// close and delete itself, for every backend.
	Sessions *Durable
}

// A Binding is what one agent link speaks and how it is reached.
type Binding struct {
	Dialect       translate.Dialect
	NewTranslator func() translate.Translator
	Dial          func(ctx context.Context, s Spawn) (Link, error)
	// Name names the agent in logs and errors.
	Name string
}

// displayName is b's name for messages: "agent" when it has none.
func (b Binding) displayName() string {
	if b.Name == "" {
		return "agent"
	}
	return b.Name
}

// SessionEventKind says what happened to a session.
type SessionEventKind int

const (
	// SessionOpened: the editor got a session/new (or load, resume)
	// answer. Body is that result.
	SessionOpened SessionEventKind = iota + 1
	// SessionPrompt: the editor sent a prompt. Body is its params.
	SessionPrompt
	// SessionUpdate: the editor was sent a session/update. Body is its
	// params.
	SessionUpdate
	// SessionTurnEnded: a prompt was answered. Body is the result, or the
	// error object when Failed.
	SessionTurnEnded
	// SessionClosed: the session was closed.
	SessionClosed
	// SessionLost: the session's agent link was lost. Body is the error
	// object naming the cause.
	SessionLost
)

// SessionEvent is one event for Bridge.OnSession.
type SessionEvent struct {
	Kind    SessionEventKind
	Session string
	// Cwd is the session's working directory (SessionOpened).
	Cwd string
	// Body is borrowed: valid only during the call.
	Body   []byte
	Failed bool
	// ref is the prompt's request (SessionPrompt, SessionTurnEnded): the
	// store writes turns an agent queues in the order of their prompts.
	ref translate.Ref
}

// defaultBinding is the Bridge's own agent.
func (b *Bridge) defaultBinding() Binding {
	return Binding{Dialect: b.Dialect, NewTranslator: b.NewTranslator, Dial: b.Dial, Name: b.AgentName}
}

// bindSession asks the BindSession hook which agent a new session goes to.
func (b *Bridge) bindSession(method string, params []byte, log hclog.Logger) (Binding, bool) {
	if b.BindSession == nil {
		return Binding{}, false
	}
	bind, ok := b.BindSession(method, params)
	if ok && (bind.NewTranslator == nil || bind.Dial == nil) {
		log.Error("BindSession returned a binding without NewTranslator or Dial; using the default agent")
		return Binding{}, false
	}
	return bind, ok
}

// newSessionID is the id of a session the bridge names itself.
func (b *Bridge) newSessionID() string {
	if b.NewSessionID != nil {
		return b.NewSessionID()
	}
	var r [12]byte
	_, _ = rand.Read(r[:]) // never fails (crypto/rand doc)
	return "sess-" + hex.EncodeToString(r[:])
}

// cancelGrace is how long a cancelled prompt may take to end before the
// engine answers it itself: Bridge.CancelGrace, or 5 s when unset.
func (b *Bridge) cancelGrace() time.Duration {
	if b.CancelGrace > 0 {
		return b.CancelGrace
	}
	return defaultCancelGrace
}
