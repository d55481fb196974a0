package legacy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"

	"github.com/acp-bridge/acp-bridge/internal/wire/reclaim"
	"github.com/acp-bridge/acp-bridge/internal/wire/slab"
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
// remote transport RFD (Streamable HTTP & WebSocket) specifies; binary
// messages are ignored. Keepalive is on by default (without it, relays
// notice a dropped link only when they next write): the connection pings
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
	// PongWait is how long a Read may wait for the agent to send anything
	// (a message, a part of one, a pong) before it fails; 0 means 30 s.
	// Only waiting counts: time the caller spends between Reads does not.
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
	// gorillaReads makes gorilla read the messages, as it does over TLS,
	// rather than wsReader (tests compare the two).
	gorillaReads bool

	// Jar, when not nil, keeps the cookies of the upgrade responses and
	// sends them on the next dial: the affinity a load balancer in front of
	// an ACP remote endpoint may set, so that a reconnect reaches the same
	// instance. Share one Jar between the dials of one agent.
	Jar http.CookieJar
}

// WSConn is a WebSocket connection to an agent, made by WebSocket.Dial. It
// has the methods of bridge.Link (see the package documentation).
//
// Read reads from the connection in the caller's goroutine; a ping goroutine
// keeps the connection alive and stops in Close.
type WSConn struct {
	conn      *websocket.Conn
	dc        *deadlineConn // the network connection under conn
	log       hclog.Logger
	what      string // "agent WebSocket <redacted URL>", for errors
	writeWait time.Duration
	readLimit int64
	pongWait  time.Duration // 0 when keepalive is off

	// Owned by the goroutine in Read (there is one at a time).
	readErr error              // Read's final error, once there is one
	small   [smallMessage]byte // a message's first bytes
	slab    slab.Slab          // where small messages are copied to
	pieces  []reclaim.Piece    // the rest of a large message, after small
	fr      *wsReader          // reads the messages, when not nil; else gorilla

	// state is readIdle or readBusy, flipped by Read, or readStopped once
	// the ctx of a running Read has ended it. See Read and watch.
	state     atomic.Int32
	watchMu   sync.Mutex      // guards stopWatch, and watchDone but for Read's own reads
	watchDone <-chan struct{} // Done of the ctx that stopWatch watches; written by Read
	stopWatch func() bool

	dead      chan struct{} // closed when Read has its final error
	closed    chan struct{} // closed by Close
	isClosed  atomic.Bool   // set by Close, before closed is
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup // the ping goroutine

	skipped atomic.Int64
}

// Read states; see WSConn.state.
const (
	readIdle int32 = iota
	readBusy
	readStopped
)

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
	// The connection under gorilla is a deadlineConn, which implements
	// the keepalive's read deadline (see there). It is the plain TCP
	// connection (to the agent, or to a proxy tunnelling to it): TLS, when
	// used, runs on top of it.
	var dc *deadlineConn
	nd := &net.Dialer{}
	d := websocket.Dialer{
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			dc = &deadlineConn{Conn: c, headers: true}
			return dc, nil
		},
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: timeout,
		TLSClientConfig:  tlsConf,
		Subprotocols:     w.Subprotocols,
		Jar:              w.Jar,
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
	// The official ACP WebSocket transport names the connection in the
	// 101 response; nothing on the socket needs it, but it is what the
	// agent's own logs and a load balancer know this connection by.
	connID := ""
	if resp != nil {
		connID = resp.Header.Get("Acp-Connection-Id")
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if dc == nil {
		// Cannot happen: gorilla dials through NetDialContext.
		conn.Close()
		return nil, fmt.Errorf("agent WebSocket %s: internal error: connection not dialed by the bridge", where)
	}

	c := &WSConn{
		conn:      conn,
		dc:        dc,
		log:       log,
		what:      "agent WebSocket " + where,
		writeWait: w.WriteWait,
		readLimit: w.ReadLimit,
		dead:      make(chan struct{}),
		closed:    make(chan struct{}),
	}
	if c.writeWait <= 0 {
		c.writeWait = defaultWriteWait
	}
	if c.readLimit <= 0 {
		c.readLimit = defaultReadLimit
	}
	conn.SetReadLimit(c.readLimit)
	dc.headers = false
	if conn.NetConn() == net.Conn(dc) && !w.gorillaReads {
		// The WebSocket's bytes are dc's, not TLS's, and the
		// handshake left none of them in gorilla's buffer.
		c.fr = newWSReader(dc, conn, c.readLimit)
	}

	pongWait, pingPeriod := w.PongWait, w.PingPeriod
	if pongWait == 0 {
		pongWait = defaultPongWait
	}
	if pingPeriod == 0 {
		pingPeriod = pongWait * 2 / 3
	}
	keepalive := pongWait > 0 && pingPeriod > 0
	dc.state = &c.state
	if keepalive {
		c.pongWait = pongWait
		// From now on, after the handshake, whose deadline was gorilla's.
		// Reads of dc happen in Read, after Dial has returned c.
		dc.wait = pongWait
	}
	log.Info("agent WebSocket connected", "url", where, "subprotocol", conn.Subprotocol(), "connection_id", connID,
		"ping_period", durationOrOff(keepalive, pingPeriod), "pong_wait", durationOrOff(keepalive, pongWait))

	if keepalive {
		c.wg.Add(1)
		go c.pingLoop(pingPeriod)
	}
	return c, nil
}

// Read returns the next text message from the agent in a new slice the
// caller owns, skipping binary messages (see the package documentation for
// the contract). It reads from the connection in the calling goroutine.
//
// Cancelling ctx while Read waits makes it return ctx.Err() and leaves the
// connection unusable for reading (a WebSocket read cut short corrupts the
// stream): later Reads return an error, and the caller should Close. A ctx
// that is already done when Read is called changes nothing.
func (c *WSConn) Read(ctx context.Context) ([]byte, error) {
	frame, _, err := c.read(ctx, false)
	return frame, err
}

// ReadBorrowed is Read for a caller that is done with most messages
// before it reads again: when borrowed is true the message lies in the
// connection's read buffer and is valid only until the next Read or
// ReadBorrowed, and the caller copies what it keeps. A stream the caller
// passes on at once then costs no copy and no allocation per message.
func (c *WSConn) ReadBorrowed(ctx context.Context) (frame []byte, borrowed bool, err error) {
	return c.read(ctx, true)
}

func (c *WSConn) read(ctx context.Context, borrow bool) (_ []byte, borrowed bool, _ error) {
	// (Each check here is paid by every message of a stream: the closed
	// flag is an atomic load where a select on c.closed cost 60
	// instructions, and the ctx already watched is known by its Done.)
	if c.isClosed.Load() {
		return nil, false, closedError(c.what)
	}
	if c.readErr != nil {
		return nil, false, c.readErr
	}
	if done := ctx.Done(); done == nil || done != c.watchDone {
		// A ctx not watched yet is checked before it is: a done one
		// would interrupt this Read at once. The ctx already watched,
		// done, is caught by the check after readBusy below, with the
		// same outcome: nothing read, nothing changed.
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		if err := c.watch(ctx); err != nil {
			return nil, false, err
		}
	}
	c.state.Store(readBusy)
	if err := ctx.Err(); err != nil {
		// Cancelled just now: the watch may have seen readIdle and done
		// nothing, so it is up to this check.
		if c.state.CompareAndSwap(readBusy, readIdle) {
			return nil, false, err // nothing read, no deadline set
		}
		c.fail(c.cancelledError(err))
		return nil, false, err
	}
	frame, borrowed, err := c.next(borrow)
	if !c.state.CompareAndSwap(readBusy, readIdle) {
		// ctx ended this Read (see watch). A message read whole all the
		// same is worth returning; the connection is unusable either way.
		c.fail(c.cancelledError(ctx.Err()))
		if err == nil {
			return frame, borrowed, nil
		}
		return nil, false, ctx.Err()
	}
	if err != nil {
		return nil, false, c.fail(c.readError(err))
	}
	return frame, borrowed, nil
}

// OnIdle sets f to be called, on Read's goroutine, whenever Read is about
// to wait for the network: everything read before has been returned. A
// reader that holds output back while more input is at hand flushes it
// there, as a relay does before it blocks. Call it before the first Read,
// from the goroutine that reads.
func (c *WSConn) OnIdle(f func()) { c.dc.idle = f }

// watch makes sure that cancelling ctx interrupts a running Read, by setting
// a read deadline in the past. The watch outlives the Read and serves every
// later Read with the same ctx (the bridge reads with one ctx for the whole
// connection), which spares each Read registering and unregistering with
// ctx; so the callback acts only while a Read is running (state readBusy),
// and a callback left from a replaced ctx does nothing. Called from Read.
func (c *WSConn) watch(ctx context.Context) error {
	done := ctx.Done()
	if done == nil || done == c.watchDone {
		// watchDone is written only here, by Read's goroutine.
		return nil
	}
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	select {
	case <-c.closed:
		// Close has unregistered the last watch; add none after it.
		return closedError(c.what)
	default:
	}
	if c.stopWatch != nil {
		c.stopWatch()
	}
	c.watchDone = done
	c.stopWatch = context.AfterFunc(ctx, func() {
		c.watchMu.Lock()
		defer c.watchMu.Unlock()
		if c.watchDone != done {
			return // replaced by a later Read's ctx
		}
		if c.state.CompareAndSwap(readBusy, readStopped) {
			c.dc.Conn.SetReadDeadline(aLongTimeAgo)
		}
	})
	return nil
}

// fail records err as Read's final error, stops the pings, and returns the
// final error. Called from Read.
func (c *WSConn) fail(err error) error {
	if c.readErr == nil {
		c.readErr = err
		close(c.dead)
		select {
		case <-c.closed:
		default:
			c.log.Debug("agent WebSocket read ended", "error", err)
		}
	}
	return c.readErr
}

// Write sends frame as one text message. It must be called from one
// goroutine at a time. ctx is checked before the message starts; once
// started, a message is finished or the connection fails, because a message
// cut short would corrupt the stream. Each 64 KiB of the frame must be
// accepted within WriteWait (or by ctx's deadline, if earlier).
func (c *WSConn) Write(ctx context.Context, frame []byte) error {
	select {
	case <-c.closed:
		return closedError(c.what)
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
// a short deadline), closes the connection, which ends a pending Read, and
// waits for the ping goroutine to stop. It is safe to call more than once
// and concurrently with Read and Write.
func (c *WSConn) Close() error {
	c.closeOnce.Do(func() {
		c.isClosed.Store(true)
		close(c.closed)
		// Unregister from the last Read's ctx, so that the ctx does not
		// keep c alive; a callback already started is harmless.
		c.watchMu.Lock()
		if c.stopWatch != nil {
			c.stopWatch()
		}
		c.watchMu.Unlock()
		msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
		_ = c.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeWait))
		if err := c.conn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			c.closeErr = fmt.Errorf("%s: close: %w", c.what, err)
		}
		c.wg.Wait()
		c.log.Debug("agent WebSocket closed by the bridge")
	})
	return c.closeErr
}

// Skipped reports how many binary messages the agent sent that were ignored.
func (c *WSConn) Skipped() int64 { return c.skipped.Load() }
