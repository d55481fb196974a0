// Package bridge is the engine of acp-bridge. It serves one editor over
// newline-delimited ACP v1 on stdio and relays it to one or more agent links
// through a dialect's translator. The engine alone sees the editor's request
// ids and restores them exactly; it owns sessions, the order of everything
// written to the editor, request timeouts, the cancel grace period, and the
// rule that every editor request gets exactly one answer, even when an agent
// dies or a connection drops.
package bridge

import (
	"context"
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
	// Session is the id the engine minted for the session; empty for the
	// control link.
	Session string
}

// Bridge serves one editor. Its zero value is not usable: Dialect, NewTranslator
// and Dial are required. Fields must not be changed once Serve has started.
type Bridge struct {
	// Dialect describes the agent's protocol.
	Dialect translate.Dialect
	// NewTranslator makes the translator of each agent link (from
	// Dialect.Configure).
	NewTranslator func() translate.Translator
	// Dial opens an agent link. It may block (a WebSocket handshake); the
	// engine calls it off its loop.
	Dial func(ctx context.Context, s Spawn) (Link, error)
	// AgentName names the configured agent in logs, errors and the
	// initialize answer's _meta.
	AgentName string
	// Version is the bridge's version, reported in agentInfo.
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
	// agent to end the turn before answering the prompt itself with
	// stopReason "cancelled"; 0 means 5 s.
	CancelGrace time.Duration
}
