// Package legacy holds the transports that carry frames between acp-bridge and
// an agent: a WebSocket client (WebSocket.Dial → *WSConn) and a child process
// speaking newline-delimited JSON on its stdio (Command.Start → *Process).
//
// The package knows frames, not ACP: a frame is one JSON-RPC message as the
// agent's dialect writes it, and nothing here looks inside one beyond checking
// that a stdout line is JSON at all. Translation belongs to package translate,
// sessions and ids to package bridge.
//
// Every connection type has exactly the methods of bridge.Link, so that the
// engine can use any of them (the package does not import bridge; the
// contract is restated here):
//
//	Read(ctx context.Context) ([]byte, error)      // next frame, owned by the caller
//	Write(ctx context.Context, frame []byte) error // one frame; one goroutine only
//	Close() error                                  // unblocks Read; safe to call more than once
//
// Read returns frames in the order the agent sent them, each in a new slice
// the caller owns. Once the agent is gone Read returns an error naming which
// agent transport failed and why ("agent WebSocket ws://host/acp closed:
// 1006 (abnormal closure)", "agent process exited with status 3: error:
// GEMINI_API_KEY not set"), and keeps returning it. Cancelling the ctx of a
// pending Read makes it return ctx.Err(). A Process stays usable after
// that; a WSConn does not, because a WebSocket read cut short leaves the
// stream corrupt: its later Reads fail, and the caller should Close it (the
// bridge cancels a Read's ctx only to close the link anyway). A ctx already
// done when Read is called changes nothing. Read may run concurrently with
// Write and Close, but not with another Read. After Close, Read and Write
// return an error wrapping ErrClosed.
//
// Read copies no more than it must to hand over memory of the caller's
// own. A short message of one WebSocket frame, or a line that lies whole
// in the chunk of stdout the pump read it in (see pumpStdout), is copied
// once out of the connection's buffer, a stream's short ones into blocks
// they share (package slab). A longer message of one frame is read into a
// slice of the size its header gives; any other is gathered in pieces and
// copied once into a slice of its size (package reclaim).
//
// Configuration is by plain structs (WebSocket, Command) whose zero-valued
// fields mean documented defaults, in the manner of net/http.Server. Header
// values and environment values are never logged.
package legacy

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
)

// ErrClosed is wrapped by the errors Read and Write return after Close.
var ErrClosed = errors.New("link closed by the bridge")

// linkError is a transport error whose message is written for a person
// reading the bridge's log (it says which agent transport failed and why)
// while Unwrap still exposes the cause to errors.Is and errors.As.
type linkError struct {
	msg string
	err error
}

func (e *linkError) Error() string { return e.msg }
func (e *linkError) Unwrap() error { return e.err }

// orNull returns l, or a logger that discards everything when l is nil.
func orNull(l hclog.Logger) hclog.Logger {
	if l == nil {
		return hclog.NewNullLogger()
	}
	return l
}

// snippet returns b as a single printable line of at most max runes, for
// quoting untrusted peer output (an HTTP body, a stray stdout line) in logs
// and errors without letting it forge log lines.
func snippet(b []byte, max int) string {
	var sb strings.Builder
	n := 0
	for len(b) > 0 && n < max {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		switch {
		case r == utf8.RuneError && size == 1:
			sb.WriteRune(utf8.RuneError)
		case r == '\n' || r == '\r' || r == '\t':
			sb.WriteByte(' ')
		case !unicode.IsPrint(r) && r != ' ':
			continue
		default:
			sb.WriteRune(r)
		}
		n++
	}
	s := strings.TrimSpace(sb.String())
	if len(b) > 0 {
		s += "…"
	}
	return s
}
