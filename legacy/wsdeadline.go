// deadlineConn: the network connection under a WSConn, which keeps the
// keepalive's read deadline and the write deadlines with slack.

package legacy

import (
	"net"
	"sync/atomic"
	"time"
)

// aLongTimeAgo is a read deadline that has passed, to interrupt a read.
var aLongTimeAgo = time.Unix(1, 0)

// deadlineConn is the network connection under a WSConn. With keepalive on
// (wait > 0) it keeps a read deadline at least wait ahead of every read
// from the network, so that a Read fails when the agent sends nothing at
// all, not even a pong, for wait; bytes of a large message on a slow link
// and pongs each end the wait. Time the caller spends between Reads is not
// counted, since nothing waits then.
//
// Setting a deadline takes the runtime's timer lock: once per network read
// and per WebSocket frame written, it was a fifth of an echo's instructions.
// So deadlines are set with slack and kept while they still hold: the read
// deadline is set wait plus a quarter ahead, and again only once less than
// wait is left (a silent agent fails the Read after between wait and 1.25
// wait); a write deadline t that gorilla asks for before each frame is kept
// when the one already set lies between t and a quarter of t's distance
// beyond it, and set with that slack otherwise, or exactly when it must
// come earlier (a ctx's deadline, the close handshake's short wait).
//
// Read is called by gorilla from WSConn.Read, or from Dial during the
// handshake, when wait is still 0. SetWriteDeadline is called by gorilla
// under its write lock, so one at a time.
type deadlineConn struct {
	net.Conn
	wait  time.Duration // 0: reads pass through
	state *atomic.Int32 // the WSConn's read state

	readSet  time.Time // the read deadline last set by Read (Read's goroutine)
	idle     func()    // see WSConn.OnIdle (Read's goroutine)
	writeSet time.Time // the write deadline last set (under gorilla's write lock)

	// While headers is set (the handshake of a plain ws:// connection),
	// a Read returns at most up to the end of an HTTP response's header,
	// and keeps what follows in pending, where the next Read takes it
	// from: gorilla reads the handshake's response through a buffer of its
	// own, and the agent's first frames, when they come in the same
	// packet, must not stay there once wsReader reads instead (see
	// WSConn.fr). eol counts the line ends just seen (see cut).
	headers bool
	pending []byte
	eol     int
}

func (d *deadlineConn) Read(b []byte) (int, error) {
	if len(d.pending) > 0 {
		n := copy(b, d.pending)
		d.pending = d.pending[n:]
		if len(d.pending) == 0 {
			d.pending = nil
		}
		return d.cut(b, n), nil
	}
	if d.headers {
		n, err := d.Conn.Read(b)
		return d.cut(b, n), err
	}
	if d.idle != nil {
		d.idle() // the WebSocket's buffer is empty: this read may wait
	}
	if d.wait > 0 {
		if now := time.Now(); d.readSet.Sub(now) < d.wait {
			d.readSet = now.Add(d.wait + d.wait/4)
			d.Conn.SetReadDeadline(d.readSet)
			if d.state.Load() == readStopped {
				// A cancelled ctx may have set its past deadline just
				// before ours: put it back, or the Read would wait a
				// whole wait.
				d.Conn.SetReadDeadline(aLongTimeAgo)
			}
		}
	}
	return d.Conn.Read(b)
}

// cut returns how many of the n bytes just read into b to return while
// headers is set: up to the end of a header (an empty line, CRLF or LF
// as Go's HTTP reader accepts them), the rest kept for the next Read.
func (d *deadlineConn) cut(b []byte, n int) int {
	if !d.headers {
		return n
	}
	for i := 0; i < n; i++ {
		switch b[i] {
		case '\n':
			d.eol++
			if d.eol == 2 {
				d.eol = 0
				if i+1 < n {
					d.pending = append(append([]byte(nil), b[i+1:n]...), d.pending...)
				}
				return i + 1
			}
		case '\r':
			// (part of a line end)
		default:
			d.eol = 0
		}
	}
	return n
}

func (d *deadlineConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		d.writeSet = t
		return d.Conn.SetWriteDeadline(t)
	}
	ahead := time.Until(t)
	if !d.writeSet.IsZero() && !d.writeSet.Before(t) && d.writeSet.Sub(t) <= ahead/4 {
		return nil // the deadline set already holds, with less than a quarter's slack
	}
	if d.writeSet.IsZero() || d.writeSet.After(t) {
		d.writeSet = t // earlier than the one set: exactly
	} else {
		d.writeSet = t.Add(ahead / 4)
	}
	return d.Conn.SetWriteDeadline(d.writeSet)
}

func (d *deadlineConn) SetDeadline(t time.Time) error {
	d.readSet, d.writeSet = time.Time{}, t
	return d.Conn.SetDeadline(t)
}
