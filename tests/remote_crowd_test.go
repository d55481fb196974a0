package tests

// What strangers and crowds can do to acp-bridge serve: peers without the
// token must not hold what editors need (sockets), and bodies nobody will
// take must not be read (memory).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// strangers is how many sockets the peers without the token hold: more
// than serve's socket cap at the default --max-connections (4 × 64 + 16).
const strangers = 300

// TestServeStrangersCannotLockOut: editors with the token open
// connections while 300 peers without it hold sockets: each idle after a
// 401 (reconnecting whenever serve closes it); each sending its request's
// headers a byte at a time (slowloris, reconnecting every 10 s), which
// fills every socket serve keeps (4 × 64 + 16); and both crowds at once,
// 600 peers.
func TestServeStrangersCannotLockOut(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	srv := StartServe(t, append([]string{"--token-env", "REMOTE_TOKEN", "--no-sessions"}, agent.Args...),
		append([]string{"REMOTE_TOKEN=" + refusalToken}, agent.Env...))
	// serve's socket cap at the default --max-connections.
	const sockets = 4*64 + 16

	idle := func(ctx context.Context, c net.Conn) {
		req := "POST /acp HTTP/1.1\r\nHost: " + srv.Addr() + "\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(initializeBody)) + "\r\n\r\n" + initializeBody
		if _, err := c.Write([]byte(req)); err != nil {
			return
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a request without the token: %s, want 401", resp.Status)
		}
		// Idle, as a keep-alive connection, until serve closes it.
		_, _ = br.ReadByte()
	}
	slowloris := func(ctx context.Context, c net.Conn) {
		head := "POST /acp HTTP/1.1\r\nHost: " + srv.Addr() + "\r\nX-Slow: " + strings.Repeat("a", 200)
		end := time.Now().Add(10 * time.Second)
		for i := 0; i < len(head) && time.Now().Before(end); i++ {
			if _, err := c.Write([]byte{head[i]}); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(400 * time.Millisecond):
			}
		}
	}
	t.Run("idle after a 401", func(t *testing.T) {
		crowd(t, srv, 0, 1, idle)
	})
	t.Run("slowloris", func(t *testing.T) {
		crowd(t, srv, sockets, 1, slowloris)
	})
	t.Run("both at once", func(t *testing.T) {
		crowd(t, srv, sockets, 1, idle, slowloris)
	})
}

// crowd runs strangers peers per hold, each dialing srv and running hold
// on its socket, redialing when hold returns, until the test ends. Once
// each has dialed (and serve holds at least full sockets: the crowd fills
// its cap), an editor with the token initializes and closes its
// connection, tries times, a second apart.
func crowd(t *testing.T, srv *Served, full, tries int, holds ...func(ctx context.Context, c net.Conn)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var dialed atomic.Int64
	for _, hold := range holds {
		for range strangers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first := true
				for ctx.Err() == nil {
					c, err := (&net.Dialer{}).DialContext(ctx, "tcp", srv.Addr())
					if first {
						first = false
						dialed.Add(1)
					}
					if err == nil {
						stop := context.AfterFunc(ctx, func() { c.Close() })
						hold(ctx, c)
						stop()
						c.Close()
					}
					select {
					case <-ctx.Done():
					case <-time.After(250 * time.Millisecond):
					}
				}
			}()
		}
	}
	for dialed.Load() < int64(strangers*len(holds)) {
		time.Sleep(20 * time.Millisecond)
	}
	// Let the sockets settle into what they hold (a 401 read, a first
	// header byte sent).
	time.Sleep(time.Second)
	if full > 0 {
		// The crowd must be holding every socket serve keeps, or the
		// editor below proves nothing.
		held := 0
		for deadline := time.Now().Add(sdkWait); ; time.Sleep(100 * time.Millisecond) {
			if held = openSockets(t, srv.cmd.Process.Pid); held >= full || time.Now().After(deadline) {
				break
			}
		}
		if held < full {
			t.Fatalf("the strangers hold %d of serve's sockets, want all %d", held, full)
		}
		t.Logf("serve holds %d sockets (its cap %d)", held, full)
	}

	client := &http.Client{Transport: &http.Transport{}, Timeout: 2 * sdkWait}
	defer client.CloseIdleConnections()
	var took []time.Duration
	defer func() { t.Logf("the editor's initializes took %v", took) }()
	for try := range tries {
		if try > 0 {
			time.Sleep(time.Second)
		}
		req, err := http.NewRequest(http.MethodPost, srv.Endpoint, strings.NewReader(initializeBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+refusalToken)
		began := time.Now()
		resp, err := client.Do(req)
		took = append(took, time.Since(began).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("an editor's initialize (try %d) while %d sockets without the token are held: %v", try+1, strangers*len(holds), err)
		}
		resp.Body.Close()
		id := resp.Header.Get("Acp-Connection-Id")
		if resp.StatusCode != http.StatusOK || id == "" {
			t.Fatalf("an editor's initialize (try %d): %s (connection id %q), want 200 with a connection id", try+1, resp.Status, id)
		}
		del, _ := http.NewRequest(http.MethodDelete, srv.Endpoint, nil)
		del.Header.Set("Authorization", "Bearer "+refusalToken)
		del.Header.Set("Acp-Connection-Id", id)
		resp, err = client.Do(del)
		if err != nil {
			t.Fatalf("the editor's DELETE (try %d): %v", try+1, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("the editor's DELETE (try %d): %s, want 202", try+1, resp.Status)
		}
		// A new editor each time: a socket of its own, not the last one's.
		client.CloseIdleConnections()
	}
}

// openSockets counts the sockets process pid has open (its listener
// among them).
func openSockets(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// padReader is a JSON-RPC message of exactly size bytes, padded in its
// _meta, made as it is read.
type padReader struct {
	head, tail string
	pad, off   int64
}

func newPadReader(head string, size int64) *padReader {
	const tail = `"}}}`
	return &padReader{head: head, tail: tail, pad: size - int64(len(head)+len(tail))}
}

func (p *padReader) Size() int64 { return int64(len(p.head)+len(p.tail)) + p.pad }

func (p *padReader) Read(b []byte) (int, error) {
	head := int64(len(p.head))
	n := 0
	for n < len(b) && p.off < p.Size() {
		k := 0
		switch o := p.off; {
		case o < head:
			k = copy(b[n:], p.head[o:])
		case o < head+p.pad:
			k = int(min(int64(len(b)-n), head+p.pad-o))
			for i := range k {
				b[n+i] = 'x'
			}
		default:
			k = copy(b[n:], p.tail[o-head-p.pad:])
		}
		n += k
		p.off += int64(k)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// TestServeBodiesBounded: 16 concurrent 60 MiB POSTs that name no
// connection, half an unknown Acp-Connection-Id and half none (a message
// other than initialize), are refused without being read; then (without
// the race detector) 16 that name an open connection are read within the
// per-connection and per-server bounds, the rest answered 503: serve's
// peak resident memory stays under 512 MB throughout, and it stops
// promptly on SIGTERM.
func TestServeBodiesBounded(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	srv := StartServe(t, append([]string{"--no-sessions"}, agent.Args...), agent.Env)
	const size = 60 << 20
	// post16 sends 16 POSTs of size bytes at once, the ith with the
	// connection id conn(i) ("" for none), and checks each status.
	post16 := func(what string, conn func(i int) string, want func(i, status int) bool) {
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := newPadReader(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s","_meta":{"pad":"`, size)
				req, err := http.NewRequest(http.MethodPost, srv.Endpoint, body)
				if err != nil {
					t.Error(err)
					return
				}
				req.ContentLength = body.Size()
				req.Header.Set("Content-Type", "application/json")
				if id := conn(i); id != "" {
					req.Header.Set("Acp-Connection-Id", id)
				}
				client := &http.Client{Transport: &http.Transport{}, Timeout: 2 * sdkWait}
				defer client.CloseIdleConnections()
				resp, err := client.Do(req)
				if err != nil {
					// serve answered and closed without reading the rest:
					// the client may see the close before the answer.
					t.Logf("POST %d: %v", i, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !want(i, resp.StatusCode) {
					t.Errorf("POST %d (60 MiB %s): %s %s", i, what, resp.Status, b)
				}
			}()
		}
		wg.Wait()
		hwm := vmHWM(t, srv.cmd.Process.Pid)
		switch {
		case hwm > 512<<20:
			t.Errorf("serve's peak resident memory after 16 × 60 MiB POSTs %s: %d MiB, want under 512 MiB", what, hwm>>20)
		default:
			t.Logf("serve's peak resident memory after 16 × 60 MiB POSTs %s: %d MiB", what, hwm>>20)
		}
	}
	post16("naming no connection", func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf("%032x", i+1)
		}
		return ""
	}, func(i, status int) bool {
		if i%2 == 0 {
			return status == http.StatusNotFound
		}
		return status == http.StatusRequestEntityTooLarge
	})

	if raceEnabled {
		// Under the race detector serve's resident memory measures its
		// shadow memory as much as the copies of a message (some 3.7
		// times them), and each 60 MiB message costs seconds to parse:
		// the bodies serve reads are measured in the suite's runs
		// without it (the README's test command without -race).
		t.Log("the bodies to an open connection are measured without the race detector")
	} else {
		bodiesToAConnection(t, srv, post16)
	}
	if code, ok := srv.Stop(10 * time.Second); !ok || code != 0 {
		t.Errorf("serve after SIGTERM: exit status %d, exited within 10 s: %v", code, ok)
	}
}

// bodiesToAConnection is TestServeBodiesBounded's second part: 16 POSTs
// that name an open connection, which serve reads within its bounds.
func bodiesToAConnection(t *testing.T, srv *Served, post16 func(what string, conn func(i int) string, want func(i, status int) bool)) {
	status, h, body := servePost(t, srv.Endpoint, nil, initializeBody)
	id := h.Get("Acp-Connection-Id")
	if status != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	var taken atomic.Int64
	post16("to an open connection", func(int) string { return id }, func(_, status int) bool {
		if status == http.StatusAccepted {
			taken.Add(1)
		}
		return status == http.StatusAccepted || status == http.StatusServiceUnavailable
	})
	if taken.Load() == 0 {
		t.Errorf("no 60 MiB message to an open connection was taken: the test read no body")
	}
}
