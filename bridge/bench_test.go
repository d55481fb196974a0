//go:build linux || darwin

package bridge_test

// The bridge's performance targets, as benchmarks. The machine they run on
// is shared and noisy, so no figure stands alone: each is a ratio to, or a
// difference from, a baseline measured in the same run, and the variants are
// interleaved where the workload allows it so that a burst of load from
// elsewhere hits all of them alike.
//
// Every variant talks to the same fake ACP agent over a real loopback
// WebSocket. The relays under test are the bridge, set up as
// internal/cli/serve.go sets it up (acp dialect, legacy.WebSocket dial, real
// OS pipes on the editor side), and naiveRelay below: what a user would
// otherwise run. Where the agent's and the editor's own costs must be told
// apart from the relay's, a third variant has the editor talk to the agent
// directly.
//
// Each benchmark gives meaningful figures with -benchtime=1x (it sizes its
// own workload), and ns/op is overridden to mean the bridge's time per unit
// of work (update, round trip, message):
//
//	go test -run XXX -bench RelayStream -benchtime=1x ./bridge/   # 200k updates (1M: -benchtime=1000000x)
//	go test -run XXX -bench RelayEcho   -benchtime=1x ./bridge/   # 2000 round trips each
//	go test -run XXX -bench RelayLarge  -benchtime=1x ./bridge/   # one 32 MiB and one 60 MiB echo each
//	go test -run XXX -bench SlowEditor  -benchtime=1x ./bridge/   # 1M-update flood, ~10 s (-short: 100k)

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/legacy"
	"github.com/acp-bridge/acp-bridge/translate/acp"
)

const (
	// maxMessage is the bridge's MaxMessage and every WebSocket read limit,
	// so the 60 MiB echo fits everywhere.
	maxMessage = 64 << 20
	// bufSize is every relay's and peer's I/O buffer, as in legacy.
	bufSize = 64 << 10
	// waitTimeout bounds each phase of a benchmark, so that a relay that
	// hangs fails the benchmark instead of blocking it.
	waitTimeout = 60 * time.Second
)

// chunkText is the text of every streamed update: 64 bytes, a typical token
// batch of a model's answer.
const chunkText = "The quick brown fox jumps over the lazy dog, one more token now."

var updateFrame = []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + chunkText + `"}}}}`)

func init() {
	if len(chunkText) != 64 {
		panic("chunkText must be 64 bytes")
	}
}

// --- the fake agent ------------------------------------------------------------

// benchAgent is a fake ACP agent on a loopback WebSocket. It answers
// initialize and session/new, echoes the params of _bench/echo byte for byte
// as its result, and answers _bench/stream {"n":N} with N agent_message_chunk
// updates and then {"stopReason":"end_turn"}.
//
// It never holds a whole large message: an echo is streamed back while the
// request is still arriving. So the only large buffers in the process are the
// relay's, and the direct baseline of BenchmarkRelayLarge shows how little
// the agent and the editor add.
type benchAgent struct {
	url string
	srv *http.Server
	wg  sync.WaitGroup // Serve and every connection handler

	mu    sync.Mutex
	conns map[net.Conn]bool
	err   error // the first protocol error the agent saw
}

type connKey struct{}

func startAgent(b testing.TB) *benchAgent {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	a := &benchAgent{url: "ws://" + ln.Addr().String() + "/acp", conns: make(map[net.Conn]bool)}
	a.srv = &http.Server{
		Handler: http.HandlerFunc(a.handle),
		// The handler needs the batchConn under its WebSocket.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		_ = a.srv.Serve(batchListener{ln})
	}()
	return a
}

// close stops the agent and waits for every handler; hijacked connections
// are not the http.Server's to close, so they are closed here.
func (a *benchAgent) close(b testing.TB) {
	_ = a.srv.Close()
	a.mu.Lock()
	for c := range a.conns {
		c.Close()
	}
	a.mu.Unlock()
	a.wg.Wait()
	if a.err != nil {
		b.Errorf("fake agent: %v", a.err)
	}
}

func (a *benchAgent) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
	}
}

var upgrader = websocket.Upgrader{ReadBufferSize: bufSize, WriteBufferSize: bufSize}

func (a *benchAgent) handle(w http.ResponseWriter, r *http.Request) {
	a.wg.Add(1)
	defer a.wg.Done()
	bc := r.Context().Value(connKey{}).(*batchConn)
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	a.mu.Lock()
	a.conns[bc] = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.conns, bc)
		a.mu.Unlock()
		conn.Close()
	}()
	conn.SetReadLimit(maxMessage)
	head := make([]byte, 4<<10)
	copyBuf := make([]byte, bufSize)
	for {
		typ, msg, err := conn.NextReader()
		if err != nil {
			return // the relay hung up
		}
		if typ != websocket.TextMessage {
			continue
		}
		if err := a.answer(conn, bc, msg, head, copyBuf); err != nil {
			var closed *websocket.CloseError
			if !errors.As(err, &closed) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrUnexpectedEOF) {
				a.fail(err)
			}
			return
		}
	}
}

// answer handles one message, of which only the head is read up front.
func (a *benchAgent) answer(conn *websocket.Conn, bc *batchConn, msg io.Reader, buf, copyBuf []byte) error {
	n, err := io.ReadFull(msg, buf)
	whole := errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
	if err != nil && !whole {
		return err
	}
	head := buf[:n]
	// id and method come before params in every frame the relays write
	// (and the editors here write), so the head of a message still
	// arriving is enough to route it.
	id := gjson.GetBytes(head, "id").Raw
	method := gjson.GetBytes(head, "method").Str
	switch method {
	case "_bench/echo":
		return echo(conn, id, head, msg, copyBuf)
	case "_bench/sink":
		return sink(conn, id, msg, copyBuf)
	case "_bench/emit":
		return emit(conn, id, int(gjson.GetBytes(head, "params.n").Int()))
	}
	if !whole {
		return fmt.Errorf("%q message larger than %d bytes", method, len(buf))
	}
	switch method {
	case "initialize":
		return reply(conn, id, `{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}`)
	case "session/new":
		return reply(conn, id, `{"sessionId":"sess-1"}`)
	case "_bench/stream":
		return stream(conn, bc, id, gjson.GetBytes(head, "params.n").Int())
	}
	if id == "" {
		return nil // a notification (session/cancel, …): nothing to answer
	}
	return conn.WriteMessage(websocket.TextMessage,
		[]byte(`{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32601,"message":"Method not found"}}`))
}

func reply(conn *websocket.Conn, id, result string) error {
	return conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":`+result+`}`))
}

// echo answers a _bench/echo request whose head has been read, copying its
// params to the result as they arrive.
func echo(conn *websocket.Conn, id string, head []byte, rest io.Reader, buf []byte) error {
	const key = `"params":`
	p := bytes.Index(head, []byte(key))
	if p < 0 {
		return errors.New("_bench/echo without params near its start")
	}
	w, err := conn.NextWriter(websocket.TextMessage)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":`); err != nil {
		return err
	}
	// Params are the last member: everything up to the request's closing
	// brace, which is held back one read so it is not copied.
	body := io.MultiReader(bytes.NewReader(head[p+len(key):]), rest)
	var held []byte
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(held); werr != nil {
				return werr
			}
			if _, werr := w.Write(buf[:n-1]); werr != nil {
				return werr
			}
			held = append(held[:0], buf[n-1])
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if string(held) != "}" {
		return fmt.Errorf("_bench/echo request does not end with its params and }: ends %q", held)
	}
	if _, err := io.WriteString(w, "}"); err != nil {
		return err
	}
	return w.Close()
}

// stream answers _bench/stream, writing as fast as the relay takes it.
func stream(conn *websocket.Conn, bc *batchConn, id string, n int64) error {
	// One socket write per 64 KiB, not per update: the agent must outrun
	// every relay, or all of them would look as fast as the agent.
	bc.batch(true)
	for i := int64(0); i < n; i++ {
		if err := conn.WriteMessage(websocket.TextMessage, updateFrame); err != nil {
			bc.batch(false)
			return err
		}
	}
	err := reply(conn, id, `{"stopReason":"end_turn"}`)
	if ferr := bc.batch(false); err == nil {
		err = ferr
	}
	return err
}

// batchConn is the agent's side of a TCP connection. While batching it
// gathers gorilla's per-message socket writes into 64 KiB ones. A pong sent
// meanwhile waits for the batch, well within any keepalive.
type batchConn struct {
	net.Conn
	mu       sync.Mutex
	bw       *bufio.Writer
	batching bool
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.batching {
		return c.bw.Write(p)
	}
	return c.Conn.Write(p)
}

// batch turns batching on or off; off flushes the batch.
func (c *batchConn) batch(on bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batching = on
	if on {
		return nil
	}
	return c.bw.Flush()
}

type batchListener struct{ net.Listener }

func (l batchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &batchConn{Conn: c, bw: bufio.NewWriterSize(c, bufSize)}, nil
}

// --- the relays ----------------------------------------------------------------

// relay serves one editor on in and out for the agent at url until in ends.
type relay func(url string, in io.Reader, out io.Writer) error

// bridgeRelay is the bridge as internal/cli/serve.go runs it for a
// WebSocket agent.
func bridgeRelay(url string, in io.Reader, out io.Writer) error {
	return serveACP(in, out, nil, dialWS(url))
}

// serveACP serves one editor on in and out with the bridge as serving
// (internal/cli/serve.go) builds it for an ACP agent reached through dial; sessions nil: no
// transcript store.
func serveACP(in io.Reader, out io.Writer, sessions *bridge.Durable, dial func(context.Context) (bridge.Link, error)) error {
	newTranslator, diags := acp.Dialect.Configure(nil)
	if diags.HasErrors() {
		return diags
	}
	b := &bridge.Bridge{
		Dialect:       acp.Dialect,
		NewTranslator: newTranslator,
		MaxMessage:    maxMessage,
		Sessions:      sessions,
		Dial:          func(ctx context.Context, _ bridge.Spawn) (bridge.Link, error) { return dial(ctx) },
	}
	return b.Serve(context.Background(), in, out)
}

// dialWS dials the WebSocket agent at url.
func dialWS(url string) func(context.Context) (bridge.Link, error) {
	return func(ctx context.Context) (bridge.Link, error) {
		conn, err := legacy.WebSocket{URL: url, ReadLimit: maxMessage}.Dial(ctx)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return conn, nil
	}
}

// naiveRelay is what a user would otherwise run: each editor line becomes one
// text message and each agent message one line, with no validation, no id
// rewriting and no ordering beyond the socket's. Its agent → editor side
// flushes when nothing more is immediately pending, like the bridge's, so
// the comparison is between relays that batch writes equally.
func naiveRelay(url string, in io.Reader, out io.Writer) error {
	d := websocket.Dialer{ReadBufferSize: bufSize, WriteBufferSize: bufSize}
	conn, _, err := d.Dial(url, nil)
	if err != nil {
		return err
	}
	conn.SetReadLimit(maxMessage)

	// agent → editor: one goroutine reads messages ahead into a bounded
	// channel (so a slow editor slows the agent), one writes them.
	msgs := make(chan []byte, 256)
	go func() {
		defer close(msgs)
		for {
			_, m, err := conn.ReadMessage()
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	wrote := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(out, bufSize)
		var err error
		for m := range msgs {
			if err != nil {
				continue // the editor is gone: drain until the agent side ends
			}
			bw.Write(m)
			bw.WriteByte('\n')
			if len(msgs) == 0 {
				if err = bw.Flush(); err != nil {
					conn.Close()
				}
			}
		}
		if err == nil {
			err = bw.Flush()
		}
		wrote <- err
	}()

	// editor → agent, on this goroutine, until the editor closes its end.
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, bufSize), maxMessage)
	for sc.Scan() {
		if err := conn.WriteMessage(websocket.TextMessage, sc.Bytes()); err != nil {
			break
		}
	}
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
		time.Now().Add(time.Second))
	conn.Close()
	if err := <-wrote; err != nil {
		return err
	}
	return sc.Err()
}

// --- the editors ---------------------------------------------------------------

// editorEnd is an editor in front of a relay: it writes the relay's stdin
// and reads its stdout, both real OS pipes, so the bridge and the naive
// relay pay the same pipe costs an editor-spawned process pays.
type editorEnd struct {
	name string
	in   *os.File // write end of the relay's stdin
	out  *os.File // read end of the relay's stdout
	br   *bufio.Reader
	done chan error // the relay's return
	id   int
}

func startRelay(b testing.TB, name string, run relay, url string) *editorEnd {
	b.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	e := &editorEnd{name: name, in: inW, out: outR, br: bufio.NewReaderSize(outR, bufSize), done: make(chan error, 1)}
	go func() {
		err := run(url, inR, outW)
		outW.Close()
		inR.Close()
		e.done <- err
	}()
	return e
}

// arm gives the next phase waitTimeout to complete.
func (e *editorEnd) arm() {
	deadline := time.Now().Add(waitTimeout)
	e.in.SetWriteDeadline(deadline)
	e.out.SetReadDeadline(deadline)
}

// call sends one request and returns its answer, which must be the next line.
func (e *editorEnd) call(method, params string) ([]byte, error) {
	e.id++
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", e.id, method, params)
	if _, err := io.WriteString(e.in, line); err != nil {
		return nil, fmt.Errorf("%s: writing %s: %w", e.name, method, err)
	}
	answer, err := e.br.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("%s: waiting for the answer to %s: %w", e.name, method, err)
	}
	if !bytes.HasPrefix(answer, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":`, e.id)) {
		return nil, fmt.Errorf("%s: %s answered %.300s", e.name, method, answer)
	}
	return answer, nil
}

// handshake is what an editor does first; it is never timed.
func (e *editorEnd) handshake(b testing.TB) {
	b.Helper()
	e.arm()
	if _, err := e.call("initialize", `{"protocolVersion":1,"clientCapabilities":{}}`); err != nil {
		b.Fatal(err)
	}
	if _, err := e.call("session/new", `{"cwd":"/","mcpServers":[]}`); err != nil {
		b.Fatal(err)
	}
}

// stream asks for n updates and reads them and the answer.
func (e *editorEnd) stream(n int) error {
	e.arm()
	e.id++
	if _, err := fmt.Fprintf(e.in, `{"jsonrpc":"2.0","id":%d,"method":"_bench/stream","params":{"n":%d}}`+"\n", e.id, n); err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	// Counting lines is enough to check the relay: one lost or added line
	// and the answer is not where it must be (or never comes: timeout).
	for i := 0; i < n; i++ {
		if _, err := e.br.ReadSlice('\n'); err != nil {
			return fmt.Errorf("%s: update %d of %d: %w", e.name, i, n, err)
		}
	}
	answer, err := e.br.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("%s: answer after %d updates: %w", e.name, n, err)
	}
	if !bytes.Contains(answer, []byte(`"stopReason":"end_turn"`)) {
		return fmt.Errorf("%s: expected the stream's answer after %d updates, got %.300s", e.name, n, answer)
	}
	return nil
}

// echoLarge sends a request with size bytes of params, generated as they
// are written, and reads the answer without keeping it: the
// editor side holds nothing large, so the heap measures the relay.
func (e *editorEnd) echoLarge(size int) error {
	e.arm()
	e.id++
	prefix := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"_bench/echo","params":`, e.id)
	written := make(chan error, 1)
	go func() { written <- writeLarge(e.in, prefix, size, "}\n") }()
	var n int
	var start []byte // the first bytes, to say what came instead of the echo
	for {
		chunk, err := e.br.ReadSlice('\n')
		if len(start) < 300 {
			start = append(start, chunk[:min(len(chunk), 300-len(start))]...)
		}
		n += len(chunk)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: reading the echo (%d bytes so far): %w", e.name, n, err)
		}
		break
	}
	if err := <-written; err != nil {
		return fmt.Errorf("%s: writing the request: %w", e.name, err)
	}
	if want := len(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":`, e.id)) + size + len("}\n"); n != want {
		return fmt.Errorf("%s: echo line of %d bytes, want %d: %s", e.name, n, want, start)
	}
	return nil
}

// close ends the editor's input and waits for the relay to finish.
func (e *editorEnd) close(b testing.TB) {
	e.in.Close()
	e.out.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, err := io.Copy(io.Discard, e.br); err != nil {
		b.Errorf("%s: stdout still open after stdin closed: %v", e.name, err)
	}
	e.out.Close() // a relay still writing now fails and stops
	select {
	case err := <-e.done:
		if err != nil {
			b.Errorf("%s stopped with: %v", e.name, err)
		}
	case <-time.After(waitTimeout):
		b.Errorf("%s still running %v after its stdin closed", e.name, waitTimeout)
	}
}

// xs is what large params are made of.
var xs = bytes.Repeat([]byte("x"), bufSize)

// writeLarge writes prefix, size bytes of params and suffix. The params are
// an object holding one long string: JSON-RPC params must be structured (a
// bare string is refused, rightly, by the bridge).
func writeLarge(w io.Writer, prefix string, size int, suffix string) error {
	const open, end = `{"data":"`, `"}`
	if _, err := io.WriteString(w, prefix+open); err != nil {
		return err
	}
	for left := size - len(open) - len(end); left > 0; {
		n := min(left, len(xs))
		if _, err := w.Write(xs[:n]); err != nil {
			return err
		}
		left -= n
	}
	_, err := io.WriteString(w, end+suffix)
	return err
}

// directEnd is an editor that talks to the agent itself, with no relay:
// the baseline that tells the relay's costs from the agent's and the
// editor's, which share the relay's process here.
type directEnd struct {
	conn *websocket.Conn
	buf  bytes.Buffer
	id   int
}

func dialDirect(b testing.TB, url string) *directEnd {
	b.Helper()
	d := websocket.Dialer{ReadBufferSize: bufSize, WriteBufferSize: bufSize}
	conn, _, err := d.Dial(url, nil)
	if err != nil {
		b.Fatal(err)
	}
	conn.SetReadLimit(maxMessage)
	return &directEnd{conn: conn}
}

func (d *directEnd) close() {
	_ = d.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
		time.Now().Add(time.Second))
	d.conn.Close()
}

func (d *directEnd) stream(n int) error {
	d.conn.SetReadDeadline(time.Now().Add(waitTimeout))
	d.id++
	if err := d.conn.WriteMessage(websocket.TextMessage,
		fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"_bench/stream","params":{"n":%d}}`, d.id, n)); err != nil {
		return err
	}
	for i := 0; i <= n; i++ {
		_, r, err := d.conn.NextReader()
		if err != nil {
			return fmt.Errorf("direct: message %d of %d: %w", i, n+1, err)
		}
		d.buf.Reset()
		if _, err := d.buf.ReadFrom(r); err != nil {
			return err
		}
	}
	if !bytes.Contains(d.buf.Bytes(), []byte(`"stopReason":"end_turn"`)) {
		return fmt.Errorf("direct: expected the stream's answer after %d updates, got %.300s", n, d.buf.Bytes())
	}
	return nil
}

func (d *directEnd) echoLarge(size int) error {
	deadline := time.Now().Add(waitTimeout)
	d.conn.SetReadDeadline(deadline)
	d.conn.SetWriteDeadline(deadline)
	d.id++
	prefix := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"_bench/echo","params":`, d.id)
	// The agent answers while the request still arrives: write and read
	// at once, or both ends wait on full socket buffers.
	written := make(chan error, 1)
	go func() {
		w, err := d.conn.NextWriter(websocket.TextMessage)
		if err == nil {
			err = writeLarge(w, prefix, size, "}")
		}
		if err == nil {
			err = w.Close()
		}
		written <- err
	}()
	_, r, err := d.conn.NextReader()
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		return err
	}
	if err := <-written; err != nil {
		return err
	}
	if want := len(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":`, d.id)) + size + 1; int(n) != want {
		return fmt.Errorf("direct: echo of %d bytes, want %d", n, want)
	}
	return nil
}

// --- measuring -----------------------------------------------------------------

// cpuTime is the CPU time, user and system, of every thread of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// noLeaks returns a function to defer that fails the benchmark unless the
// number of goroutines is back to what it is now.
func noLeaks(b testing.TB) func() {
	before := runtime.NumGoroutine()
	return func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				b.Errorf("%d goroutines still running, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// heapRun is what one relayed message cost in heap.
type heapRun struct {
	peak     float64 // peak heap objects above the start, in bytes
	retained float64 // heap objects above the start after a GC at the end
	alloc    float64 // bytes allocated
	dur      time.Duration
}

// measureHeap runs f after a full GC, sampling the bytes in heap objects
// (runtime/metrics: cheap, no stop-the-world, unlike ReadMemStats) every
// millisecond. The figure counts garbage not yet collected as well: that is
// memory the process holds all the same. What is still live after f, with
// the relay still running, is what the relay keeps for later messages.
func measureHeap(f func() error) (heapRun, error) {
	const objects, allocs = "/memory/classes/heap/objects:bytes", "/gc/heap/allocs:bytes"
	s := []metrics.Sample{{Name: objects}, {Name: allocs}}
	runtime.GC()
	metrics.Read(s)
	base, alloc0 := s[0].Value.Uint64(), s[1].Value.Uint64()
	peak := base
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		one := []metrics.Sample{{Name: objects}}
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			metrics.Read(one)
			peak = max(peak, one[0].Value.Uint64())
		}
	}()
	start := time.Now()
	err := f()
	dur := time.Since(start)
	close(stop)
	<-stopped
	metrics.Read(s)
	peak = max(peak, s[0].Value.Uint64())
	r := heapRun{peak: float64(peak - base), alloc: float64(s[1].Value.Uint64() - alloc0), dur: dur}
	runtime.GC()
	metrics.Read(s)
	r.retained = float64(s[0].Value.Uint64()) - float64(base)
	return r, err
}

// rssBytes is this process's resident set size.
func rssBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/self/statm: %q", b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize()), err
}

func percentile(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// --- the benchmarks ------------------------------------------------------------

// BenchmarkRelayStream streams agent_message_chunk updates through each
// relay, as an agent answering a prompt does: max(b.N, 200k) of them (20k
// with -short), in ten rounds that interleave the variants. It is for
// profiling the engine in one process (go test -cpuprofile); it is not how
// the bridge is measured.
//
// Its figures are this whole test process's: the agent, the editor and
// both relays run in it, so their costs dilute each other and one
// scheduler caps every rate. The process-cpu-* metrics are the process's
// CPU time (getrusage: every thread, the GC, the kernel's work for its
// system calls) over each variant's rounds, less the same workload with the
// editor reading the agent's WebSocket itself ("direct", no relay), per
// update: they say how the in-process cost moves from one change to the
// next, not what the bridge costs. The bridge's own figures, as an editor
// runs it, come from the process-level benchmark in ./bench.
func BenchmarkRelayStream(b *testing.B) {
	defer noLeaks(b)()
	agent := startAgent(b)
	defer agent.close(b)
	n := b.N
	if floor := 200_000; testing.Short() {
		n = max(n, floor/10)
	} else {
		n = max(n, floor)
	}

	direct := dialDirect(b, agent.url)
	defer direct.close()
	naive := startRelay(b, "naive relay", naiveRelay, agent.url)
	defer naive.close(b)
	naive.handshake(b)
	bridged := startRelay(b, "bridge", bridgeRelay, agent.url)
	defer bridged.close(b)
	bridged.handshake(b)

	type variant struct {
		name     string
		run      func(int) error
		dur, cpu time.Duration
	}
	vs := []*variant{{name: "direct", run: direct.stream}, {name: "naive", run: naive.stream}, {name: "bridge", run: bridged.stream}}
	const rounds = 10
	b.ResetTimer()
	for r := range rounds {
		chunk := n / rounds
		if r == rounds-1 {
			chunk = n - chunk*(rounds-1)
		}
		for k := range vs {
			v := vs[(r+k)%len(vs)] // rotate who goes first
			runtime.GC()           // each variant starts with no one else's garbage
			c0, t0 := cpuTime(), time.Now()
			if err := v.run(chunk); err != nil {
				b.Fatal(err)
			}
			v.dur += time.Since(t0)
			v.cpu += cpuTime() - c0
		}
	}
	b.StopTimer()

	d, nv, br := vs[0], vs[1], vs[2]
	per := func(t time.Duration) float64 { return micros(t) / float64(n) }
	b.ReportMetric(float64(br.dur.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(float64(n)/br.dur.Seconds(), "updates/s")
	b.ReportMetric(float64(n)/nv.dur.Seconds(), "naive-updates/s")
	b.ReportMetric(float64(n)/d.dur.Seconds(), "direct-updates/s")
	b.ReportMetric(nv.dur.Seconds()/br.dur.Seconds(), "in-process-x-naive")
	b.ReportMetric(per(br.cpu-d.cpu), "process-cpu-us/update")
	b.ReportMetric(per(nv.cpu-d.cpu), "naive-process-cpu-us/update")
	b.ReportMetric(float64(br.cpu-d.cpu)/float64(nv.cpu-d.cpu), "process-cpu-x-naive")
}

// BenchmarkRelayEcho times sequential round trips of a tiny extension
// request, max(b.N, 2000) per relay (500 with -short), alternating between
// the relays so that both see the same machine.
//
// Target: added-p50-us (bridge p50 − naive p50) ≤ 30.
func BenchmarkRelayEcho(b *testing.B) {
	defer noLeaks(b)()
	agent := startAgent(b)
	defer agent.close(b)
	n := b.N
	if floor := 2000; testing.Short() {
		n = max(n, floor/4)
	} else {
		n = max(n, floor)
	}

	naive := startRelay(b, "naive relay", naiveRelay, agent.url)
	defer naive.close(b)
	naive.handshake(b)
	bridged := startRelay(b, "bridge", bridgeRelay, agent.url)
	defer bridged.close(b)
	bridged.handshake(b)

	roundTrip := func(e *editorEnd, i int) (time.Duration, error) {
		params := `{"seq":` + strconv.Itoa(i) + `}`
		t0 := time.Now()
		answer, err := e.call("_bench/echo", params)
		d := time.Since(t0)
		if err == nil && !bytes.HasSuffix(answer, []byte(`"result":`+params+"}\n")) {
			err = fmt.Errorf("%s: echo of %s answered %.300s", e.name, params, answer)
		}
		return d, err
	}
	const warmup = 50 // first calls grow stacks and buffers
	ends := []*editorEnd{naive, bridged}
	lat := [][]time.Duration{make([]time.Duration, 0, n), make([]time.Duration, 0, n)}
	b.ResetTimer()
	for i := range warmup + n {
		if i%256 == 0 {
			naive.arm()
			bridged.arm()
		}
		for k := range ends {
			j := (i + k) % 2 // alternate who goes first
			d, err := roundTrip(ends[j], i)
			if err != nil {
				b.Fatal(err)
			}
			if i >= warmup {
				lat[j] = append(lat[j], d)
			}
		}
	}
	b.StopTimer()

	var mean time.Duration
	for _, d := range lat[1] {
		mean += d
	}
	slices.Sort(lat[0])
	slices.Sort(lat[1])
	np50, bp50 := percentile(lat[0], 50), percentile(lat[1], 50)
	b.ReportMetric(float64(mean.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(micros(bp50), "p50-us")
	b.ReportMetric(micros(percentile(lat[1], 99)), "p99-us")
	b.ReportMetric(micros(np50), "naive-p50-us")
	b.ReportMetric(micros(percentile(lat[0], 99)), "naive-p99-us")
	b.ReportMetric(micros(bp50-np50), "added-p50-us")
}

// BenchmarkRelayLarge echoes one large message through each relay: 32 MiB
// and 60 MiB of params (one long JSON string in an object), each relay
// freshly started, b.N times.
//
// Target: peak-heap/msg ≤ 2, the bridge's peak heap while relaying (request
// and answer both pass through it) over the message size.
//
// The agent and the editor live in this process and hold buffers too, so
// the same echo is first measured with the editor talking to the agent
// directly; the relays' figures are their increment over that baseline
// (reported alone as agent-peak-heap/msg: small, since both stream).
// retained-heap/msg is what a relay still holds after the message, with
// a GC done and the relay still serving: buffers kept for later messages.
func BenchmarkRelayLarge(b *testing.B) {
	for _, size := range []int{32 << 20, 60 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			defer noLeaks(b)()
			agent := startAgent(b)
			defer agent.close(b)
			var direct, naive, bridged heapRun
			add := func(sum *heapRun, r heapRun) {
				sum.peak += r.peak / float64(b.N)
				sum.retained += r.retained / float64(b.N)
				sum.alloc += r.alloc / float64(b.N)
				sum.dur += r.dur / time.Duration(b.N)
			}
			b.ResetTimer()
			for range b.N {
				d := dialDirect(b, agent.url)
				r, err := measureHeap(func() error { return d.echoLarge(size) })
				d.close()
				if err != nil {
					b.Fatal(err)
				}
				add(&direct, r)
				for _, v := range []struct {
					name string
					run  relay
					sum  *heapRun
				}{{"naive relay", naiveRelay, &naive}, {"bridge", bridgeRelay, &bridged}} {
					e := startRelay(b, v.name, v.run, agent.url)
					e.handshake(b)
					r, err := measureHeap(func() error { return e.echoLarge(size) })
					e.close(b)
					if err != nil {
						b.Fatal(err)
					}
					add(v.sum, r)
				}
			}
			b.StopTimer()

			msg := float64(size)
			b.ReportMetric(float64(bridged.dur.Nanoseconds()), "ns/op")
			b.ReportMetric((bridged.peak-direct.peak)/msg, "peak-heap/msg")
			b.ReportMetric((naive.peak-direct.peak)/msg, "naive-peak-heap/msg")
			b.ReportMetric(direct.peak/msg, "agent-peak-heap/msg")
			b.ReportMetric((bridged.retained-direct.retained)/msg, "retained-heap/msg")
			b.ReportMetric((naive.retained-direct.retained)/msg, "naive-retained-heap/msg")
			b.ReportMetric((bridged.alloc-direct.alloc)/msg, "alloc/msg")
			b.ReportMetric((naive.alloc-direct.alloc)/msg, "naive-alloc/msg")
			b.ReportMetric(bridged.dur.Seconds()*1000, "ms")
			b.ReportMetric(naive.dur.Seconds()*1000, "naive-ms")
		})
	}
}

// BenchmarkSlowEditor floods a slow editor with updates through each relay:
// 1,000,000 of them (100,000 with -short). The editor reads one line, stalls
// for half a second, then pauses 20 ms every 10,000 lines. A relay that
// applies backpressure holds a bounded number of updates whatever the flood;
// one that does not absorbs what the agent sends during the stall (and
// whenever it outruns the editor) and grows with it. The figure is the
// growth of this process's resident set over the flood, after handing freed
// memory back to the OS, so that one relay's high-water mark does not hide
// the other's. Garbage between collections makes a few MB of it noise.
func BenchmarkSlowEditor(b *testing.B) {
	if _, err := rssBytes(); err != nil {
		b.Skip("no /proc/self/statm:", err)
	}
	defer noLeaks(b)()
	agent := startAgent(b)
	defer agent.close(b)
	n := 1_000_000
	if testing.Short() {
		n /= 10
	}
	const stall, every, pause = 500 * time.Millisecond, 10_000, 20 * time.Millisecond

	flood := func(name string, run relay) (growth int64, dur time.Duration) {
		e := startRelay(b, name, run, agent.url)
		defer e.close(b)
		e.handshake(b)
		debug.FreeOSMemory()
		base, _ := rssBytes()
		peak := base
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				if rss, err := rssBytes(); err == nil {
					peak = max(peak, rss)
				}
			}
		}()
		defer func() { close(stop); <-stopped; growth = peak - base }()

		t0 := time.Now()
		e.arm()
		e.id++
		if _, err := fmt.Fprintf(e.in, `{"jsonrpc":"2.0","id":%d,"method":"_bench/stream","params":{"n":%d}}`+"\n", e.id, n); err != nil {
			b.Fatal(err)
		}
		for i := range n + 1 {
			switch {
			case i == 1:
				time.Sleep(stall)
			case i > 0 && i%every == 0:
				time.Sleep(pause)
				e.arm()
			}
			if _, err := e.br.ReadSlice('\n'); err != nil {
				b.Fatalf("%s: line %d of %d: %v", name, i, n+1, err)
			}
		}
		return 0, time.Since(t0)
	}
	b.ResetTimer()
	for range b.N {
		ng, nd := flood("naive relay", naiveRelay)
		bg, bd := flood("bridge", bridgeRelay)
		b.ReportMetric(float64(bg)/(1<<20), "rss-growth-MB")
		b.ReportMetric(float64(ng)/(1<<20), "naive-rss-growth-MB")
		b.ReportMetric(float64(n)/bd.Seconds(), "updates/s")
		b.ReportMetric(float64(n)/nd.Seconds(), "naive-updates/s")
	}
}
