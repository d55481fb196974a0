package legacy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"
)

// Defaults for the zero-valued fields of WebSocket.
const (
	defaultDialTimeout = 10 * time.Second
	defaultPongWait    = 30 * time.Second
	defaultWriteWait   = 10 * time.Second
	defaultReadLimit   = 64 << 20
)

const (
	// closeWait bounds the best-effort close frame sent by Close, so that a
	// dead or stalled agent cannot delay the bridge's shutdown.
	closeWait = 250 * time.Millisecond
	// writeChunk is how much of a frame Write hands to the connection per
	// write deadline: WriteWait bounds the time without progress rather than
	// the time for a whole (possibly 64 MiB) frame over a slow link.
	writeChunk = 64 << 10
	// bufferSize is the dialer's read and write buffer size. A long message
	// goes out as fragments of this size, which RFC 6455 §5.4 requires every
	// peer to reassemble into one message.
	bufferSize = 64 << 10
)

// WebSocket configures a WebSocket connection to an agent. The zero value of
// each field other than URL means the default given in its comment.
//
// Frames are carried one JSON-RPC message per text message, as the ACP
// WebSocket transport RFD specifies (acp-spec.md §15.4); binary messages are
// ignored. Keepalive is on by default (peers.md §c.5): the connection pings
// the agent every PingPeriod and gives up when nothing, not even a pong, has
// arrived for PongWait, so with the defaults a dead agent or network is
// detected within 30 s.
type WebSocket struct {
	// URL is the agent's ws:// or wss:// address. A user:password in it is
	// sent as HTTP Basic authorization unless Header has an Authorization.
	// Logs and errors show the URL without user info and query values.
	URL string
	// Header holds extra handshake headers with their values already
	// resolved (for example Authorization). Values are never logged.
	Header http.Header
	// Subprotocols are offered in Sec-WebSocket-Protocol, in order.
	Subprotocols []string
	// CAFile names a PEM bundle whose certificates replace the system roots
	// for wss://; "" means the system roots.
	CAFile string
	// DialTimeout bounds connecting, TLS and the HTTP upgrade; 0 means 10 s.
	DialTimeout time.Duration
	// PongWait is how long the connection may stay silent (no message, no
	// pong) before Read fails; 0 means 30 s. The read deadline is extended
	// by every pong and by every byte of every message received.
	PongWait time.Duration
	// PingPeriod is the interval between pings; 0 means PongWait*2/3, so
	// that at least one pong is due within every PongWait; a PingPeriod
	// not shorter than PongWait makes an idle link fail. A negative
	// PingPeriod (or PongWait) disables keepalive altogether: no pings and
	// no read deadline.
	PingPeriod time.Duration
	// WriteWait bounds each stage of a Write (64 KiB at a time) and each
	// ping; 0 means 10 s.
	WriteWait time.Duration
	// ReadLimit is the largest message accepted from the agent, in bytes;
	// 0 means 64 MiB. A larger message ends the connection (close code
	// 1009) and Read returns an error naming the limit.
	ReadLimit int64
	// Logger receives the connection's logs; nil means no logging.
	Logger hclog.Logger
}

// WSConn is a WebSocket connection to an agent, made by WebSocket.Dial. It
// has the methods of bridge.Link (see the package documentation).
//
// A read goroutine reads messages ahead of Read, one at a time, so that a
// Read can be cancelled by its ctx or by Close without corrupting the
// connection; a ping goroutine keeps the connection alive. Both stop in
// Close.
type WSConn struct {
	conn      *websocket.Conn
	log       hclog.Logger
	writeWait time.Duration
	readLimit int64
	pongWait  time.Duration // 0 when keepalive is off

	frames chan []byte   // text messages, handed over by the read goroutine
	done   chan struct{} // closed when the read goroutine stops; err is set first
	err    error

	closed    chan struct{} // closed by Close
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup

	skipped atomic.Int64
}

// Dial connects to the agent. ctx bounds the dial only (together with
// DialTimeout); the connection lives until Close or until the agent goes
// away. Errors name the URL (without secrets), and a refused handshake
// reports the HTTP status and the start of the response body.
func (w WebSocket) Dial(ctx context.Context) (*WSConn, error) {
	log := orNull(w.Logger)
	u, err := url.Parse(w.URL)
	if err != nil {
		// url.Error repeats the whole URL, secrets included; keep the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("agent WebSocket: invalid URL: %w", err)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return nil, fmt.Errorf("agent WebSocket %s: URL scheme must be ws or wss", redactURL(u))
	}
	header := w.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	if u.User != nil {
		// gorilla rejects user info in a ws URL; send it the way a browser
		// would, as Basic authorization.
		if header.Get("Authorization") == "" {
			pass, _ := u.User.Password()
			cred := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pass))
			header.Set("Authorization", "Basic "+cred)
		}
		u.User = nil
	}
	where := redactURL(u)
	tlsConf, err := tlsConfig(w.CAFile)
	if err != nil {
		return nil, err
	}
	timeout := w.DialTimeout
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: timeout,
		TLSClientConfig:  tlsConf,
		Subprotocols:     w.Subprotocols,
		ReadBufferSize:   bufferSize,
		WriteBufferSize:  bufferSize,
	}
	log.Debug("dialing agent WebSocket", "url", where, "headers", headerNames(header), "subprotocols", w.Subprotocols)
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, resp, err := d.DialContext(dctx, u.String(), header)
	if err != nil {
		return nil, dialError(ctx, where, timeout, resp, err)
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}

	c := &WSConn{
		conn:      conn,
		log:       log,
		writeWait: w.WriteWait,
		readLimit: w.ReadLimit,
		frames:    make(chan []byte),
		done:      make(chan struct{}),
		closed:    make(chan struct{}),
	}
	if c.writeWait <= 0 {
		c.writeWait = defaultWriteWait
	}
	if c.readLimit <= 0 {
		c.readLimit = defaultReadLimit
	}
	conn.SetReadLimit(c.readLimit)

	pongWait, pingPeriod := w.PongWait, w.PingPeriod
	if pongWait == 0 {
		pongWait = defaultPongWait
	}
	if pingPeriod == 0 {
		pingPeriod = pongWait * 2 / 3
	}
	keepalive := pongWait > 0 && pingPeriod > 0
	if keepalive {
		c.pongWait = pongWait
		// The pong handler runs inside the read goroutine's reads, so it may
		// set the read deadline (gorilla doc.go, Concurrency).
		conn.SetPongHandler(func(string) error {
			return conn.SetReadDeadline(time.Now().Add(pongWait))
		})
	}
	log.Info("agent WebSocket connected", "url", where, "subprotocol", conn.Subprotocol(),
		"ping_period", durationOrOff(keepalive, pingPeriod), "pong_wait", durationOrOff(keepalive, pongWait))

	c.wg.Add(1)
	go c.readLoop()
	if keepalive {
		c.wg.Add(1)
		go c.pingLoop(pingPeriod)
	}
	return c, nil
}

// Read returns the next text message from the agent (see the package
// documentation for the contract).
func (c *WSConn) Read(ctx context.Context) ([]byte, error) {
	select {
	case <-c.closed:
		return nil, closedError("agent WebSocket")
	default:
	}
	select {
	case frame := <-c.frames:
		return frame, nil
	case <-c.done:
		return nil, c.err
	case <-c.closed:
		return nil, closedError("agent WebSocket")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write sends frame as one text message. It must be called from one
// goroutine at a time. ctx is checked before the message starts; once
// started, a message is finished or the connection fails, because a message
// cut short would corrupt the stream. Each 64 KiB of the frame must be
// accepted within WriteWait (or by ctx's deadline, if earlier).
func (c *WSConn) Write(ctx context.Context, frame []byte) error {
	select {
	case <-c.closed:
		return closedError("agent WebSocket")
	default:
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline := func() time.Time {
		t := time.Now().Add(c.writeWait)
		if d, ok := ctx.Deadline(); ok && d.Before(t) {
			return d
		}
		return t
	}
	// Pings go out concurrently through WriteControl, which gorilla allows
	// alongside one writer (doc.go, Concurrency), so no lock is needed.
	w, err := c.conn.NextWriter(websocket.TextMessage)
	if err != nil {
		return c.writeError(err)
	}
	for len(frame) > 0 {
		n := min(len(frame), writeChunk)
		c.conn.SetWriteDeadline(deadline())
		if _, err := w.Write(frame[:n]); err != nil {
			return c.writeError(err)
		}
		frame = frame[n:]
	}
	c.conn.SetWriteDeadline(deadline())
	if err := w.Close(); err != nil {
		return c.writeError(err)
	}
	return nil
}

// Close sends the agent a normal-closure close frame (best effort, bounded by
// a short deadline), closes the connection, and waits for the read and ping
// goroutines to stop. It unblocks a pending Read and is safe to call more
// than once and concurrently with Read and Write.
func (c *WSConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
		_ = c.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeWait))
		if err := c.conn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			c.closeErr = fmt.Errorf("agent WebSocket: close: %w", err)
		}
		c.wg.Wait()
		c.log.Debug("agent WebSocket closed by the bridge")
	})
	return c.closeErr
}

// Skipped reports how many binary messages the agent sent that were ignored.
func (c *WSConn) Skipped() int64 { return c.skipped.Load() }

// readLoop reads messages and hands text messages to Read until the
// connection fails or is closed.
func (c *WSConn) readLoop() {
	defer c.wg.Done()
	defer close(c.done)
	for {
		frame, err := c.next()
		if err != nil {
			c.err = c.readError(err)
			select {
			case <-c.closed:
			default:
				c.log.Debug("agent WebSocket read ended", "error", c.err)
			}
			return
		}
		if frame == nil {
			continue
		}
		select {
		case c.frames <- frame:
		case <-c.closed:
			c.err = closedError("agent WebSocket")
			return
		}
	}
}

// next reads one message: a text message's bytes, or nil for an ignored
// binary message.
func (c *WSConn) next() ([]byte, error) {
	if c.pongWait > 0 {
		// Counted from the moment we start waiting, not from the last
		// message: the read goroutine may have waited on a slow Read caller.
		c.conn.SetReadDeadline(time.Now().Add(c.pongWait))
	}
	typ, r, err := c.conn.NextReader()
	if err != nil {
		return nil, err
	}
	if c.pongWait > 0 {
		r = &progressReader{r: r, conn: c.conn, wait: c.pongWait}
	}
	if typ == websocket.BinaryMessage {
		// ACP's WebSocket transport ignores binary frames (acp-spec.md §15.4).
		n, err := io.Copy(io.Discard, r)
		if err != nil {
			return nil, err
		}
		c.skipped.Add(1)
		c.log.Debug("ignoring binary WebSocket message from the agent", "bytes", n, "ignored_so_far", c.skipped.Load())
		return nil, nil
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// progressReader extends the read deadline whenever message bytes arrive, so
// that a large message on a slow link is not mistaken for a dead peer.
type progressReader struct {
	r    io.Reader
	conn *websocket.Conn
	wait time.Duration
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.conn.SetReadDeadline(time.Now().Add(p.wait))
	}
	return n, err
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
		case <-c.done:
			return
		case <-t.C:
			if err := c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.writeWait)); err != nil {
				c.log.Debug("agent WebSocket ping failed", "error", err)
			}
		}
	}
}

// readError turns a read error into one that says why the agent's
// connection ended.
func (c *WSConn) readError(err error) error {
	select {
	case <-c.closed:
		return closedError("agent WebSocket")
	default:
	}
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		msg := fmt.Sprintf("agent WebSocket closed: %d (%s)", ce.Code, closeCodeText(ce.Code))
		if ce.Text != "" && ce.Code != websocket.CloseAbnormalClosure {
			msg += ": " + snippet([]byte(ce.Text), 120)
		}
		return &linkError{msg: msg, err: err}
	case errors.Is(err, websocket.ErrReadLimit):
		return &linkError{msg: fmt.Sprintf("agent WebSocket: message larger than the %d-byte read limit", c.readLimit), err: err}
	case errors.As(err, &ne) && ne.Timeout():
		return &linkError{msg: fmt.Sprintf("agent WebSocket: no pong within %s", c.pongWait), err: err}
	default:
		return &linkError{msg: "agent WebSocket: read: " + err.Error(), err: err}
	}
}

func (c *WSConn) writeError(err error) error {
	select {
	case <-c.closed:
		return closedError("agent WebSocket")
	default:
	}
	return &linkError{msg: "agent WebSocket: write: " + err.Error(), err: err}
}

// dialError explains a failed dial: a refused handshake with its HTTP status
// and the start of the body, a timeout with the limit, anything else as is.
func dialError(ctx context.Context, where string, timeout time.Duration, resp *http.Response, err error) error {
	prefix := "agent WebSocket " + where + ": "
	if resp != nil {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		msg := prefix + "handshake refused: HTTP " + resp.Status
		if resp.StatusCode == http.StatusSwitchingProtocols {
			msg = prefix + "invalid WebSocket upgrade response"
		}
		if s := snippet(body, 200); s != "" {
			msg += ": " + s
		}
		return &linkError{msg: msg, err: err}
	}
	var ne net.Error
	if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
		return &linkError{msg: fmt.Sprintf("%sno WebSocket handshake within %s", prefix, timeout), err: err}
	}
	return &linkError{msg: prefix + err.Error(), err: err}
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
