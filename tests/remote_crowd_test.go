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

// TestServeStrangersCannotLockOut: an editor with the token opens a
// connection while 300 peers without it hold sockets, first each idle after
// a 401 (reconnecting whenever serve closes it), then each sending its
// request's headers a byte at a time (slowloris, reconnecting every 10 s).
func TestServeStrangersCannotLockOut(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	srv := StartServe(t, append([]string{"--token-env", "REMOTE_TOKEN", "--no-sessions"}, agent.Args...),
		append([]string{"REMOTE_TOKEN=" + refusalToken}, agent.Env...))

	t.Run("idle after a 401", func(t *testing.T) {
		crowd(t, srv, func(ctx context.Context, c net.Conn) {
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
		})
	})
	t.Run("slowloris", func(t *testing.T) {
		crowd(t, srv, func(ctx context.Context, c net.Conn) {
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
		})
	})
}

// crowd runs strangers peers, each dialing srv and running hold on its
// socket, redialing when hold returns, until the test ends; once each has
// dialed, an editor with the token must initialize.
func crowd(t *testing.T, srv *Served, hold func(ctx context.Context, c net.Conn)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var dialed atomic.Int64
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
	for dialed.Load() < strangers {
		time.Sleep(20 * time.Millisecond)
	}
	// Let the sockets settle into what they hold (a 401 read, a first
	// header byte sent).
	time.Sleep(time.Second)

	client := &http.Client{Transport: &http.Transport{}, Timeout: 2 * sdkWait}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, srv.Endpoint, strings.NewReader(initializeBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+refusalToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("an editor's initialize while %d sockets without the token are held: %v", strangers, err)
	}
	resp.Body.Close()
	id := resp.Header.Get("Acp-Connection-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("an editor's initialize: %s (connection id %q), want 200 with a connection id", resp.Status, id)
	}
	del, _ := http.NewRequest(http.MethodDelete, srv.Endpoint, nil)
	del.Header.Set("Authorization", "Bearer "+refusalToken)
	del.Header.Set("Acp-Connection-Id", id)
	resp, err = client.Do(del)
	if err != nil {
		t.Fatalf("the editor's DELETE: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("the editor's DELETE: %s, want 202", resp.Status)
	}
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
// other than initialize), are refused without being read: serve's peak
// resident memory stays under 512 MB and it stops promptly on SIGTERM.
func TestServeBodiesBounded(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	srv := StartServe(t, append([]string{"--no-sessions"}, agent.Args...), agent.Env)
	const size = 60 << 20
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
			want := http.StatusRequestEntityTooLarge
			if i%2 == 0 {
				req.Header.Set("Acp-Connection-Id", fmt.Sprintf("%032x", i+1))
				want = http.StatusNotFound
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
			if resp.StatusCode != want {
				t.Errorf("POST %d (60 MiB naming no connection): %s %s, want %d", i, resp.Status, b, want)
			}
		}()
	}
	wg.Wait()
	if hwm := vmHWM(t, srv.cmd.Process.Pid); hwm > 512<<20 {
		t.Errorf("serve's peak resident memory after 16 × 60 MiB POSTs naming no connection: %d MiB, want under 512 MiB", hwm>>20)
	} else {
		t.Logf("serve's peak resident memory: %d MiB", hwm>>20)
	}
	if code, ok := srv.Stop(10 * time.Second); !ok || code != 0 {
		t.Errorf("serve after SIGTERM: exit status %d, exited within 10 s: %v", code, ok)
	}
}
