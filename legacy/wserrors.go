// What a WebSocket link's errors say: why a read, write or dial failed
// or the connection closed, and what is logged of a URL and headers
// (never a secret).

package legacy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// readError turns a read error into one that says why the agent's
// connection ended.
func (c *WSConn) readError(err error) error {
	select {
	case <-c.closed:
		return closedError(c.what)
	default:
	}
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		msg := fmt.Sprintf("%s closed: %d (%s)", c.what, ce.Code, closeCodeText(ce.Code))
		if ce.Text != "" && ce.Code != websocket.CloseAbnormalClosure {
			msg += ": " + snippet([]byte(ce.Text), 120)
		}
		return &linkError{msg: msg, err: err}
	case errors.Is(err, websocket.ErrReadLimit):
		return &linkError{msg: fmt.Sprintf("%s: message larger than the %d-byte read limit", c.what, c.readLimit), err: err}
	case errors.As(err, &ne) && ne.Timeout():
		return &linkError{msg: fmt.Sprintf("%s: no pong within %s", c.what, c.pongWait), err: err}
	default:
		return &linkError{msg: c.what + ": read: " + err.Error(), err: err}
	}
}

func (c *WSConn) writeError(err error) error {
	select {
	case <-c.closed:
		return closedError(c.what)
	default:
	}
	return &linkError{msg: c.what + ": write: " + err.Error(), err: err}
}

// dialError explains a failed dial in one line that names the agent's URL
// once, rather than the address again in every layer's wrapping ("dial tcp
// 127.0.0.1:8765: connect: connection refused"):
//
//	agent unreachable at ws://host/acp: connection refused
//	agent unreachable at ws://host/acp: no answer within 10s
//	agent at ws://host/acp: handshake refused: HTTP 401 Unauthorized: <body>
//	agent at ws://host/acp: no WebSocket handshake within 10s
//	agent at ws://host/acp: WebSocket handshake failed: <cause>
//
// "Unreachable" is for failures to connect at all (refused, no such host,
// no route, no answer), where the fix is the address or the agent's
// process; "agent at" for an agent that answered but did not complete the
// WebSocket handshake. The error wraps err.
func dialError(ctx context.Context, where string, timeout time.Duration, resp *http.Response, err error) error {
	at := "agent at " + where + ": "
	if resp != nil {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		msg := at + "handshake refused: HTTP " + resp.Status
		if resp.StatusCode == http.StatusSwitchingProtocols {
			msg = at + "invalid WebSocket upgrade response"
		}
		if s := snippet(body, 200); s != "" {
			msg += ": " + s
		}
		return &linkError{msg: msg, err: err}
	}
	if cerr := ctx.Err(); cerr != nil {
		// The caller gave up, which is no fault of the agent's.
		return &linkError{msg: at + "connecting stopped: " + cerr.Error(), err: err}
	}
	var ne net.Error
	timedOut := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		reason := fmt.Sprintf("no answer within %s", timeout)
		if !timedOut {
			reason = dialCause(oe.Err)
		}
		return &linkError{msg: "agent unreachable at " + where + ": " + reason, err: err}
	}
	if timedOut {
		return &linkError{msg: fmt.Sprintf("%sno WebSocket handshake within %s", at, timeout), err: err}
	}
	cause := dialCause(err)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		cause = "the agent closed the connection"
	}
	return &linkError{msg: at + "WebSocket handshake failed: " + cause, err: err}
}

// dialCause returns the system's own words for a network error, without the
// operation and addresses that net wraps around them: "connection refused"
// rather than "dial tcp 127.0.0.1:8765: connect: connection refused".
func dialCause(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		if dns.IsNotFound {
			return "no such host"
		}
		return "DNS lookup of " + dns.Name + ": " + dns.Err
	}
	// Only the wrappers themselves are peeled: a cause that explains more
	// around a wrapped network error keeps its words.
	for {
		switch e := err.(type) {
		case *net.OpError:
			if e.Err == nil {
				return err.Error()
			}
			err = e.Err
		case *os.SyscallError:
			err = e.Err
		default:
			return err.Error()
		}
	}
}

// cancelledError is Read's final error after a cancelled ctx interrupted a
// read.
func (c *WSConn) cancelledError(err error) error {
	return &linkError{msg: c.what + ": a cancelled Read left the connection unreadable", err: err}
}

func closedError(what string) error {
	return &linkError{msg: what + ": " + ErrClosed.Error(), err: ErrClosed}
}

// closeCodeText names an RFC 6455 §7.4.1 (and IANA registry) close code.
func closeCodeText(code int) string {
	switch code {
	case 1000:
		return "normal closure"
	case 1001:
		return "going away"
	case 1002:
		return "protocol error"
	case 1003:
		return "unsupported data"
	case 1005:
		return "no status"
	case 1006:
		return "abnormal closure"
	case 1007:
		return "invalid payload data"
	case 1008:
		return "policy violation"
	case 1009:
		return "message too big"
	case 1010:
		return "mandatory extension"
	case 1011:
		return "internal server error"
	case 1012:
		return "service restart"
	case 1013:
		return "try again later"
	case 1014:
		return "bad gateway"
	case 1015:
		return "TLS handshake failure"
	}
	return "unknown code"
}

// redactURL renders u for logs and errors: no user info, and every query
// value replaced, since tokens often travel in either.
func redactURL(u *url.URL) string {
	r := *u
	r.User = nil
	r.Fragment, r.RawFragment = "", ""
	if r.RawQuery != "" {
		q := r.Query()
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = url.QueryEscape(k) + "=REDACTED"
		}
		r.RawQuery = strings.Join(parts, "&")
	}
	return r.String()
}

// headerNames lists h's keys (never its values) for logging.
func headerNames(h http.Header) []string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func durationOrOff(on bool, d time.Duration) string {
	if !on {
		return "off"
	}
	return d.String()
}
