// Reading a WSConn's messages (its own reader on ws://, gorilla's over
// TLS; binary messages skipped, large ones in pieces) and pinging the
// agent while it is connected.

package legacy

import (
	"io"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/wire/reclaim"
	"github.com/gorilla/websocket"
)

// next reads the next text message, skipping binary ones. Called from
// Read.
func (c *WSConn) next(borrow bool) ([]byte, bool, error) {
	if c.fr != nil {
		return c.nextOwn(borrow)
	}
	for {
		typ, r, err := c.conn.NextReader()
		if err != nil {
			return nil, false, err
		}
		if typ == websocket.TextMessage {
			m, err := c.readMessage(r)
			return m, false, err
		}
		// ACP's WebSocket transport ignores binary frames.
		n, err := io.Copy(io.Discard, r)
		if err != nil {
			return nil, false, err
		}
		c.skipped.Add(1)
		c.log.Debug("ignoring binary WebSocket message from the agent", "bytes", n, "ignored_so_far", c.skipped.Load())
	}
}

// nextOwn is next when wsReader reads: a message of one frame that fits
// c.small is copied from where it lies in the reader's buffer (or lent from
// there, when borrow is set), and any other is read as gorilla's are.
func (c *WSConn) nextOwn(borrow bool) ([]byte, bool, error) {
	for {
		typ, whole, err := c.fr.next(smallMessage - 1) // (as readMessage, which copies what is shorter than c.small from there)
		if err != nil {
			return nil, false, err
		}
		if typ == websocket.TextMessage {
			var m []byte
			switch {
			case whole != nil && borrow:
				return whole, true, nil
			case whole != nil:
				return c.slab.Copy(whole), false, nil
			case c.fr.final:
				// One frame, whose header gave the message's length.
				m, err = c.readSized(c.fr.left)
			default:
				m, err = c.readMessage(c.fr)
			}
			return m, false, err
		}
		n := int64(len(whole))
		if whole == nil {
			if n, err = io.Copy(io.Discard, c.fr); err != nil {
				return nil, false, err
			}
		}
		c.skipped.Add(1)
		c.log.Debug("ignoring binary WebSocket message from the agent", "bytes", n, "ignored_so_far", c.skipped.Load())
	}
}

const (
	// smallMessage is the size of WSConn.small, which takes the start of
	// every message: most ACP messages fit, and then the only allocation
	// is the exact-size copy Read returns.
	smallMessage = 4 << 10
)

// readMessage reads the message r into a slice of its own. Called from
// Read.
func (c *WSConn) readMessage(r io.Reader) ([]byte, error) {
	n, err := c.readFull(r, c.small[:])
	if err == io.EOF {
		return c.slab.Copy(c.small[:n]), nil
	}
	if err != nil {
		return nil, err
	}
	// The message is larger than c.small: gather it in pieces, then copy
	// it once into a slice of its exact length (see reclaim.Piece).
	defer c.releasePieces()
	total := len(c.small)
	for {
		piece := reclaim.NewPiece()
		c.pieces = append(c.pieces, piece)
		n, err := c.readFull(r, piece.B[:])
		total += n
		if err == io.EOF {
			// Free memory goes back to the OS before the message's
			// slice adds to the heap, the pieces as they are copied, and
			// what is left of them is collected after the copy (see
			// package reclaim).
			reclaim.Now(total)
			msg := make([]byte, 0, total)
			msg = append(msg, c.small[:]...)
			msg = reclaim.Join(msg, c.pieces, n)
			c.releasePieces()
			reclaim.Collect(total)
			return msg, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readSized reads the message the wsReader serves, n bytes long, into one
// slice of exactly its size, straight from the connection once the bytes
// buffered are taken. Gathered in pieces and then copied into a slice of
// its size, as a message of unknown length is, a large message costs
// twice its size at the peak; read this way, once. (The read limit,
// checked against the frame's header, bounds n.) Called from Read.
func (c *WSConn) readSized(n int64) ([]byte, error) {
	reclaim.Collect(int(n)) // earlier garbage, before the message adds to the heap
	msg := make([]byte, n)
	if _, err := io.ReadFull(c.fr, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// releasePieces frees the pieces of c.pieces.
func (c *WSConn) releasePieces() {
	for _, p := range c.pieces {
		p.Free()
	}
	clear(c.pieces)
	if cap(c.pieces) > 64 {
		c.pieces = nil // the list itself after a very large message
	}
	c.pieces = c.pieces[:0]
}

// readFull reads from r until b is full or the message ends. It returns
// io.EOF only at the end of the message, with n possibly > 0.
func (c *WSConn) readFull(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// pingLoop pings the agent every period until the connection is closed or
// its reads have ended. A failed ping is only logged: a dead peer shows up
// as a read error or the missing pong.
func (c *WSConn) pingLoop(period time.Duration) {
	defer c.wg.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-c.dead:
			return
		case <-t.C:
			if err := c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.writeWait)); err != nil {
				c.log.Debug("agent WebSocket ping failed", "error", err)
			}
		}
	}
}
