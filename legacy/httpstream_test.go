package legacy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/remote"
)

// echoEngine answers each request with its params; a session/prompt first
// gets a session/update and a session/request_permission of the prompt's
// session, whose answer it reports in the prompt's result.
func echoEngine(ctx context.Context, id string, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	pending := map[string]string{} // permission request id → prompt id
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		switch {
		case m.Method == "session/prompt":
			var p struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			io.WriteString(out, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"`+p.SessionID+`","update":{"n":1}}}`+"\n")
			io.WriteString(out, `{"jsonrpc":"2.0","id":"perm","method":"session/request_permission","params":{"sessionId":"`+p.SessionID+`"}}`+"\n")
			pending[`"perm"`] = string(m.ID)
		case m.Method == "":
			io.WriteString(out, `{"jsonrpc":"2.0","id":`+pending[string(m.ID)]+`,"result":{"permission":`+string(m.Result)+`}}`+"\n")
		default:
			io.WriteString(out, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+string(m.Params)+"}\n")
		}
	}
	return nil
}

func readFrame(t *testing.T, c *HTTPConn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return string(f)
}

// TestHTTPStream: a whole exchange over Streamable HTTP, a request of the
// agent's answered on its session's stream, and Close.
func TestHTTPStream(t *testing.T) {
	srv := &remote.Server{Engine: echoEngine}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Shutdown(context.Background())
	ctx := context.Background()
	c, err := HTTPStream{URL: ts.URL}.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":0,"method":"session/new","params":{}}`)); err == nil || !strings.Contains(err.Error(), "must be initialize") {
		t.Errorf("a first frame other than initialize: %v", err)
	}
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)); err != nil {
		t.Fatal(err)
	}
	if got := readFrame(t, c); got != `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}` {
		t.Errorf("initialize answer %s", got)
	}
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"sessionId":"s-1"}}`)); err != nil {
		t.Fatal(err)
	}
	if got := readFrame(t, c); !strings.Contains(got, `"id":2`) {
		t.Errorf("session/new answer %s", got)
	}
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s-1"}}`)); err != nil {
		t.Fatal(err)
	}
	if got := readFrame(t, c); !strings.Contains(got, `"session/update"`) {
		t.Errorf("update %s", got)
	}
	if got := readFrame(t, c); !strings.Contains(got, `"session/request_permission"`) {
		t.Errorf("permission request %s", got)
	}
	// The answer goes back with the session the request came on.
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":"perm","result":{"outcome":"ok"}}`)); err != nil {
		t.Fatal(err)
	}
	if got := readFrame(t, c); got != `{"jsonrpc":"2.0","id":3,"result":{"permission":{"outcome":"ok"}}}` {
		t.Errorf("prompt answer %s", got)
	}
	c.Close()
	if _, err := c.Read(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after Close: %v", err)
	}
}

// TestHTTPStreamServerGone: when the server forgets the connection (it
// restarted), the link fails with a cause a person can act on.
func TestHTTPStreamServerGone(t *testing.T) {
	srv := &remote.Server{Engine: echoEngine}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx := context.Background()
	c, err := HTTPStream{URL: ts.URL}.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	readFrame(t, c)
	srv.Shutdown(ctx) // every connection ends; its streams close
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = c.Read(rctx)
	if err == nil || !strings.Contains(err.Error(), "event stream ended") {
		t.Errorf("Read after the server dropped the connection: %v", err)
	}
	// A refusal names the status and the server's reason.
	c2, _ := HTTPStream{URL: ts.URL + "/"}.Dial(ctx)
	defer c2.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "acp-bridge: the bearer token is wrong", http.StatusUnauthorized)
	}))
	defer refusing.Close()
	c3, _ := HTTPStream{URL: refusing.URL}.Dial(ctx)
	defer c3.Close()
	err = c3.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "token is wrong") {
		t.Errorf("initialize refused with 401: %v", err)
	}
}

// TestAffinityCookie: the cookie a load balancer sets on the first
// connection (the initialize answer, or a WebSocket's 101) goes with the
// next connection of the same agent, over HTTP and WebSocket alike.
func TestAffinityCookie(t *testing.T) {
	srv := &remote.Server{Engine: echoEngine}
	defer srv.Shutdown(context.Background())
	var mu sync.Mutex
	var seen []string // the affinity cookie of each initialize or upgrade
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := r.Header.Get("Acp-Connection-Id") == "" && (r.Method == http.MethodPost || r.Header.Get("Upgrade") != "")
		if first {
			c, err := r.Cookie("lb")
			mu.Lock()
			if err == nil {
				seen = append(seen, c.Value)
			} else {
				seen = append(seen, "")
			}
			mu.Unlock()
			http.SetCookie(w, &http.Cookie{Name: "lb", Value: "instance-7", Path: "/"})
		}
		srv.ServeHTTP(w, r)
	}))
	defer lb.Close()
	ctx := context.Background()
	init := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)

	jar, _ := cookiejar.New(nil)
	for range 2 {
		c, err := HTTPStream{URL: lb.URL, Jar: jar}.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Write(ctx, init); err != nil {
			t.Fatal(err)
		}
		readFrame(t, c)
		c.Close()
	}
	wsJar, _ := cookiejar.New(nil)
	for range 2 {
		c, err := WebSocket{URL: "ws" + strings.TrimPrefix(lb.URL, "http"), Jar: wsJar}.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"", "instance-7", "", "instance-7"}; !slices.Equal(seen, want) {
		t.Errorf("affinity cookies seen by the balancer: %q, want %q", seen, want)
	}
}

// TestHTTPStreamReadLimit: an event over ReadLimit fails the link, saying
// so, instead of being held in memory.
func TestHTTPStreamReadLimit(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Acp-Connection-Id", "c-1")
		if r.Method == http.MethodPost {
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: "+strings.Repeat("x", 500)+"\n\n")
	}))
	defer ts.Close()
	ctx := context.Background()
	c, err := HTTPStream{URL: ts.URL, ReadLimit: 100}.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	readFrame(t, c)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = c.Read(rctx)
	if !errors.Is(err, errSSETooLong) || !strings.Contains(err.Error(), "over 100 bytes") {
		t.Errorf("Read of an oversized event: %v", err)
	}
}

// TestHTTPStreamRepeatedInitialize: the transport has no initialize on an
// existing connection (servers refuse it with 400), yet an editor may
// initialize again at any time and must be answered. After a successful
// initialize the connection's answer is the answer, and the connection, its
// streams and its sessions go on; after a failed one a new connection is
// opened, and the end of the old one's stream does not fail the link.
func TestHTTPStreamRepeatedInitialize(t *testing.T) {
	failFirst := func(ctx context.Context, id string, in io.Reader, out io.Writer) error {
		r, w := io.Pipe()
		go func() {
			sc := bufio.NewScanner(in)
			for sc.Scan() {
				line := sc.Text()
				if strings.Contains(line, `"initialize"`) && strings.Contains(line, `"fail":true`) {
					var m struct{ ID json.RawMessage }
					_ = json.Unmarshal(sc.Bytes(), &m)
					io.WriteString(out, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32603,"message":"not today"}}`+"\n")
					continue
				}
				io.WriteString(w, line+"\n")
			}
			w.Close()
		}()
		return echoEngine(ctx, id, r, out)
	}
	for _, c := range []struct {
		name  string
		first string
		want  string
	}{
		{"after a success", `{"protocolVersion":1,"n":1}`, `{"jsonrpc":"2.0","id":"again","result":{"protocolVersion":1,"n":1}}`},
		{"after a failure", `{"protocolVersion":1,"fail":true}`, `{"jsonrpc":"2.0","id":"again","result":{"protocolVersion":1,"n":2}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := &remote.Server{Engine: failFirst}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			defer srv.Shutdown(context.Background())
			ctx := context.Background()
			conn, err := HTTPStream{URL: ts.URL}.Dial(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":`+c.first+`}`)); err != nil {
				t.Fatal(err)
			}
			readFrame(t, conn)
			if !strings.Contains(c.first, "fail") {
				if err := conn.Write(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"sessionId":"s-1"}}`)); err != nil {
					t.Fatal(err)
				}
				readFrame(t, conn)
			}
			if err := conn.Write(ctx, []byte(`{"jsonrpc":"2.0","id":"again","method":"initialize","params":{"protocolVersion":1,"n":2}}`)); err != nil {
				t.Fatalf("the repeated initialize: %v", err)
			}
			if got := readFrame(t, conn); got != c.want {
				t.Errorf("the repeated initialize was answered %s, want %s", got, c.want)
			}
			if strings.Contains(c.first, "fail") {
				if err := conn.Write(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"sessionId":"s-1"}}`)); err != nil {
					t.Fatal(err)
				}
				readFrame(t, conn)
			}
			// The session is where it was: its stream, its requests.
			if err := conn.Write(ctx, []byte(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s-1"}}`)); err != nil {
				t.Fatalf("a prompt after the repeated initialize: %v", err)
			}
			if got := readFrame(t, conn); !strings.Contains(got, `"session/update"`) {
				t.Errorf("update %s", got)
			}
			readFrame(t, conn) // the permission request
			if err := conn.Write(ctx, []byte(`{"jsonrpc":"2.0","id":"perm","result":{"outcome":"ok"}}`)); err != nil {
				t.Fatal(err)
			}
			if got := readFrame(t, conn); got != `{"jsonrpc":"2.0","id":3,"result":{"permission":{"outcome":"ok"}}}` {
				t.Errorf("prompt answer %s", got)
			}
			select {
			case <-conn.dead:
				t.Errorf("the link failed: %v", conn.err)
			default:
			}
		})
	}
}
