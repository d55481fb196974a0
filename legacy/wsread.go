package legacy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// wsReader reads an agent's WebSocket messages from the connection's bytes
// itself (RFC 6455 §5.2), where gorilla's reader would: gorilla dials,
// shakes hands and writes, and this reads. Through gorilla, each message
// of a stream cost some 600 instructions (a message reader allocated per
// message, a peek and a discard per header, a copy out of its buffer):
// over a WebSocket, more than the naive relay's whole work per message.
// Here a short message that arrives as one frame is copied once from
// where it lies in the connection's buffer, and a longer one is read into
// a slice of the size its frame's header gives.
//
// It behaves as gorilla's client reader does, frame by frame: the same
// frames are accepted and refused, with the same errors (a refused frame
// sends the agent the same close frame), the same answers to pings and
// closes, and the same read limit. FuzzWSReaderAgreesWithGorilla reads
// each input both ways and compares.
//
// It is used on a plain ws:// connection, where the handshake's response
// can be kept from gorilla's buffer (deadlineConn.headers); over TLS
// gorilla reads.
type wsReader struct {
	r      io.Reader       // the connection, after the handshake
	ws     *websocket.Conn // for the answers to pings and closes
	buf    []byte          // what was read and not yet taken is buf[lo:hi]
	lo, hi int
	rerr   error // the error that ended the last read from r
	lim    int64 // the read limit; 0: none

	// The message being read through Read.
	left   int64 // bytes of the current frame's payload not yet read
	final  bool  // the current frame is its message's last (gorilla's readFinal)
	length int64 // the message's bytes so far, for the read limit
	reader bool  // Read serves a message (gorilla's messageReader)
	err    error // the reader's final error
}

func newWSReader(r io.Reader, ws *websocket.Conn, limit int64) *wsReader {
	return &wsReader{r: r, ws: ws, buf: make([]byte, bufferSize), lim: limit, final: true}
}

// The opcodes of RFC 6455 §5.2 that gorilla does not name.
const wsContinuation = 0

// errWSUnexpectedEOF is gorilla's error for a connection that ends, even
// between frames.
var errWSUnexpectedEOF = &websocket.CloseError{Code: websocket.CloseAbnormalClosure, Text: io.ErrUnexpectedEOF.Error()}

// controlWait is how long an answer to a ping or close may take to write:
// gorilla's own.
const controlWait = time.Second

// next returns the next data message's type and, when the message is one
// frame of at most whole bytes, the message itself, in the reader's buffer
// until the next call; otherwise Read reads the message. Pings, pongs and
// closes between messages are handled as they come.
func (fr *wsReader) next(whole int) (typ int, msg []byte, err error) {
	if fr.err != nil {
		return 0, nil, fr.err
	}
	// Whatever is left of the message before (a caller that stopped
	// reading it) is skipped, as gorilla's NextReader skips it.
	fr.reader = false
	fr.length = 0
	for {
		if fr.left > 0 {
			if err := fr.skip(fr.left); err != nil {
				return 0, nil, fr.fail(err)
			}
			fr.left = 0
		}
		op, n, err := fr.header()
		if err != nil {
			return 0, nil, fr.fail(err)
		}
		if op != websocket.TextMessage && op != websocket.BinaryMessage {
			fr.left = n // a continuation of a message skipped
			continue
		}
		if fr.final && n <= int64(whole) {
			if fr.hi-fr.lo < int(n) {
				if err := fr.fill(int(n)); err != nil {
					return 0, nil, fr.fail(unexpected(err))
				}
			}
			msg = fr.buf[fr.lo : fr.lo+int(n) : fr.lo+int(n)]
			fr.lo += int(n)
			return op, msg, nil
		}
		fr.left = n
		fr.reader = true
		return op, nil, nil
	}
}

// Read reads the message next left to it, returning io.EOF at its end.
func (fr *wsReader) Read(p []byte) (int, error) {
	if !fr.reader {
		return 0, io.EOF
	}
	for fr.err == nil {
		if fr.left > 0 {
			if int64(len(p)) > fr.left {
				p = p[:fr.left]
			}
			var n int
			if fr.lo == fr.hi && len(p) >= len(fr.buf) {
				// A large message's bytes go straight where they
				// are wanted.
				if fr.rerr != nil {
					return 0, fr.fail(unexpected(fr.rerr))
				}
				var err error
				n, err = fr.r.Read(p)
				if err != nil {
					fr.rerr = err
				}
				if n == 0 && err == nil {
					continue
				}
			} else {
				if fr.lo == fr.hi {
					if err := fr.fill(1); err != nil {
						return 0, fr.fail(unexpected(err))
					}
				}
				n = copy(p, fr.buf[fr.lo:fr.hi])
				fr.lo += n
			}
			fr.left -= int64(n)
			return n, nil
		}
		if fr.final {
			fr.reader = false
			return 0, io.EOF
		}
		op, n, err := fr.header()
		if err != nil {
			return 0, fr.fail(err)
		}
		if op != wsContinuation {
			// (header refuses a new message before the last frame)
			return 0, fr.fail(errors.New("websocket: internal error, unexpected text or binary in Reader"))
		}
		fr.left = n
	}
	return 0, fr.err
}

// header reads frames until the header of a data frame, which it returns
// (its opcode and payload length; the payload is next), handling control
// frames on the way.
func (fr *wsReader) header() (op int, n int64, err error) {
	for {
		if fr.hi-fr.lo < 2 {
			if err := fr.fill(2); err != nil {
				return 0, 0, unexpected(err)
			}
		}
		b0, b1 := fr.buf[fr.lo], fr.buf[fr.lo+1]
		if b0 == 0x80|websocket.TextMessage && fr.final && (b1 < 126 || b1 == 126 && fr.hi-fr.lo >= 4) {
			// A message in one frame of less than 64 KiB: a stream's
			// every update.
			if n = int64(b1); n < 126 {
				fr.lo += 2
			} else {
				n = int64(binary.BigEndian.Uint16(fr.buf[fr.lo+2:]))
				fr.lo += 4
			}
			if fr.length += n; fr.lim > 0 && fr.length > fr.lim {
				return 0, 0, fr.tooLarge()
			}
			return websocket.TextMessage, n, nil
		}
		op = int(b0 & 0xf)
		final := b0&0x80 != 0
		n = int64(b1 & 0x7f)
		// Every fault of the first two bytes is reported, in gorilla's
		// words and order.
		var faults []string
		if b0&0x40 != 0 {
			faults = append(faults, "RSV1 set") // (no compression is offered)
		}
		if b0&0x20 != 0 {
			faults = append(faults, "RSV2 set")
		}
		if b0&0x10 != 0 {
			faults = append(faults, "RSV3 set")
		}
		switch op {
		case websocket.CloseMessage, websocket.PingMessage, websocket.PongMessage:
			if n > 125 {
				faults = append(faults, "len > 125 for control")
			}
			if !final {
				faults = append(faults, "FIN not set on control")
			}
		case websocket.TextMessage, websocket.BinaryMessage:
			if !fr.final {
				faults = append(faults, "data before FIN")
			}
			fr.final = final
		case wsContinuation:
			if fr.final {
				faults = append(faults, "continuation after FIN")
			}
			fr.final = final
		default:
			faults = append(faults, "bad opcode "+strconv.Itoa(op))
		}
		if b1&0x80 != 0 {
			faults = append(faults, "bad MASK") // (an agent's frames are never masked)
		}
		fr.lo += 2
		if len(faults) > 0 {
			return 0, 0, fr.protocolError(strings.Join(faults, ", "))
		}
		switch n {
		case 126:
			if err := fr.fill(2); err != nil {
				return 0, 0, unexpected(err)
			}
			n = int64(binary.BigEndian.Uint16(fr.buf[fr.lo:]))
			fr.lo += 2
		case 127:
			if err := fr.fill(8); err != nil {
				return 0, 0, unexpected(err)
			}
			n = int64(binary.BigEndian.Uint64(fr.buf[fr.lo:]))
			fr.lo += 8
			if n < 0 {
				return 0, 0, websocket.ErrReadLimit
			}
		}
		if op <= websocket.BinaryMessage {
			fr.length += n
			if fr.length < 0 {
				return 0, 0, websocket.ErrReadLimit
			}
			if fr.lim > 0 && fr.length > fr.lim {
				return 0, 0, fr.tooLarge()
			}
			return op, n, nil
		}
		if err := fr.fill(int(n)); err != nil {
			return 0, 0, unexpected(err)
		}
		payload := fr.buf[fr.lo : fr.lo+int(n)]
		fr.lo += int(n)
		if err := fr.control(op, payload); err != nil {
			return 0, 0, err
		}
	}
}

// control handles a ping, pong or close frame as gorilla's default
// handlers do: a ping is answered with a pong, a close with a close, and a
// close ends the reading.
func (fr *wsReader) control(op int, payload []byte) error {
	switch op {
	case websocket.PingMessage:
		err := fr.ws.WriteControl(websocket.PongMessage, payload, time.Now().Add(controlWait))
		if err == websocket.ErrCloseSent {
			return nil
		}
		// A pong that could not be written in time is not the end of
		// the connection: the peer pings again, or its pong wait ends it.
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil
		}
		return err
	case websocket.CloseMessage:
		code, text := websocket.CloseNoStatusReceived, ""
		if len(payload) >= 2 {
			code = int(binary.BigEndian.Uint16(payload))
			if !validCloseCode(code) {
				return fr.protocolError("bad close code " + strconv.Itoa(code))
			}
			text = string(payload[2:])
			if !utf8.ValidString(text) {
				return fr.protocolError("invalid utf8 payload in close frame")
			}
		}
		fr.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(controlWait))
		return &websocket.CloseError{Code: code, Text: text}
	}
	return nil // a pong: the read it ends the wait of is all it is for
}

// tooLarge tells the agent its message is over the read limit (close code
// 1009) and returns the error gorilla returns.
func (fr *wsReader) tooLarge() error {
	fr.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseMessageTooBig, ""), time.Now().Add(controlWait))
	return websocket.ErrReadLimit
}

// validCloseCode reports whether an agent may send code (RFC 6455 §7.4),
// as gorilla judges it.
func validCloseCode(code int) bool {
	switch code {
	case 1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013:
		return true
	}
	return code >= 3000 && code <= 4999
}

// protocolError tells the agent why its frame ends the connection (close
// code 1002) and returns the error gorilla returns.
func (fr *wsReader) protocolError(why string) error {
	data := websocket.FormatCloseMessage(websocket.CloseProtocolError, why)
	if len(data) > 125 {
		data = data[:125]
	}
	fr.ws.WriteControl(websocket.CloseMessage, data, time.Now().Add(controlWait))
	return errors.New("websocket: " + why)
}

// fill reads until at least n bytes (at most the buffer's size) are
// buffered.
func (fr *wsReader) fill(n int) error {
	if fr.hi-fr.lo >= n {
		return nil
	}
	if fr.lo == fr.hi {
		fr.lo, fr.hi = 0, 0
	} else if len(fr.buf)-fr.lo < n {
		fr.hi = copy(fr.buf, fr.buf[fr.lo:fr.hi])
		fr.lo = 0
	}
	for empty := 0; fr.hi-fr.lo < n; {
		if fr.rerr != nil {
			return fr.rerr
		}
		m, err := fr.r.Read(fr.buf[fr.hi:])
		fr.hi += m
		if err != nil {
			fr.rerr = err
		}
		if m == 0 && err == nil {
			if empty++; empty == 100 {
				fr.rerr = io.ErrNoProgress
			}
		}
	}
	return nil
}

// skip discards the next n bytes.
func (fr *wsReader) skip(n int64) error {
	for n > 0 {
		if fr.lo == fr.hi {
			if err := fr.fill(1); err != nil {
				return unexpected(err)
			}
		}
		k := int(min(n, int64(fr.hi-fr.lo)))
		fr.lo += k
		n -= int64(k)
	}
	return nil
}

// fail makes err the reader's final error, as gorilla's are.
func (fr *wsReader) fail(err error) error {
	if fr.err == nil {
		fr.err = err
	}
	fr.reader = false
	return fr.err
}

// unexpected is gorilla's error for a connection that ended where a frame
// was due or under way.
func unexpected(err error) error {
	if err == io.EOF {
		return errWSUnexpectedEOF
	}
	return err
}
