package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzEnvelope: whatever a client POSTs, oneLine either refuses it or
// returns the same JSON object on one line, and routing reads it without a
// panic.
func FuzzEnvelope(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s-1"}}`))
	f.Add([]byte("{\n \"id\": \"x\",\r\n \"result\": {\"sessionId\": \"s\\n2\"}\n}"))
	f.Add([]byte(`[{"id":1}]`))
	f.Add([]byte(`{"id":null,"params":[1,2]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		line, err := oneLine(body)
		if err != nil {
			return
		}
		if bytes.ContainsAny(line, "\r\n") || !json.Valid(line) || line[0] != '{' {
			t.Fatalf("oneLine(%q) = %q", body, line)
		}
		var a, b bytes.Buffer
		_ = json.Compact(&a, body)
		_ = json.Compact(&b, line)
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("oneLine changed the message: %q → %q", body, line)
		}
		env := parseEnvelope(line)
		var m map[string]json.RawMessage
		if json.Unmarshal(line, &m) == nil {
			if _, ok := m["id"]; ok != (env.id != "") {
				t.Fatalf("id present %v, envelope id %q: %q", ok, env.id, line)
			}
			// Member names are matched exactly (JSON-RPC's are
			// case-sensitive): "Method" is not the method.
			var method string
			_ = json.Unmarshal(m["method"], &method)
			if env.method != method {
				t.Fatalf("method %q, envelope method %q: %q", method, env.method, line)
			}
		}
	})
}

// echoEngine answers every request with its own params as the result and,
// for session/prompt, first sends a session/update for the prompt's
// session: enough engine to test the routing without a bridge.
func echoEngine(ctx context.Context, id string, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		if m.Method == "session/prompt" {
			var p struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			fmtUpdate := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + p.SessionID + `","update":{}}}` + "\n"
			io.WriteString(out, fmtUpdate)
		}
		io.WriteString(out, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+string(m.Params)+"}\n")
	}
	return nil
}

func do(t *testing.T, method, url string, h map[string]string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestRouting: a session's messages go to its stream, the connection's to
// the connection stream, and the transport's refusals have their statuses.
func TestRouting(t *testing.T) {
	s := &Server{Engine: echoEngine}
	ts := httptest.NewServer(s)
	defer ts.Close()
	defer s.Shutdown(context.Background())
	json := map[string]string{"Content-Type": "application/json"}

	resp := do(t, "POST", ts.URL, json, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	body, _ := io.ReadAll(resp.Body)
	id := resp.Header.Get(HeaderConnectionID)
	if resp.StatusCode != 200 || id == "" || !strings.Contains(string(body), `"result":{"protocolVersion":1}`) {
		t.Fatalf("initialize: %d %q id %q", resp.StatusCode, body, id)
	}
	withID := map[string]string{"Content-Type": "application/json", HeaderConnectionID: id}
	for _, tc := range []struct {
		name    string
		method  string
		headers map[string]string
		body    string
		status  int
	}{
		{"not json content type", "POST", map[string]string{HeaderConnectionID: id}, `{}`, 415},
		{"not an object", "POST", withID, `42`, 400},
		{"batch", "POST", withID, `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, 400},
		{"no connection id", "POST", json, `{"jsonrpc":"2.0","id":2,"method":"x"}`, 400},
		{"unknown connection", "POST", map[string]string{"Content-Type": "application/json", HeaderConnectionID: "nope"}, `{"jsonrpc":"2.0","id":2,"method":"x"}`, 404},
		{"mismatched session", "POST", map[string]string{"Content-Type": "application/json", HeaderConnectionID: id, HeaderSessionID: "a"}, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"b"}}`, 400},
		{"GET without Accept", "GET", map[string]string{HeaderConnectionID: id}, ``, 406},
		{"PUT", "PUT", withID, ``, 405},
	} {
		if got := do(t, tc.method, ts.URL, tc.headers, tc.body).StatusCode; got != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.status)
		}
	}

	stream := func(session string) *bufio.Scanner {
		h := map[string]string{"Accept": "text/event-stream", HeaderConnectionID: id}
		if session != "" {
			h[HeaderSessionID] = session
		}
		resp := do(t, "GET", ts.URL, h, "")
		if resp.StatusCode != 200 {
			t.Fatalf("GET %q: %d", session, resp.StatusCode)
		}
		return bufio.NewScanner(resp.Body)
	}
	next := func(sc *bufio.Scanner) string {
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return d
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return ""
	}
	main := stream("")
	if resp := do(t, "GET", ts.URL, map[string]string{"Accept": "text/event-stream", HeaderConnectionID: id}, ""); resp.StatusCode != 409 {
		t.Errorf("a second receiver of the connection stream: %d, want 409", resp.StatusCode)
	}
	if r := do(t, "POST", ts.URL, withID, `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"n":1}}`); r.StatusCode != 202 {
		t.Fatalf("session/new: %d", r.StatusCode)
	}
	if got := next(main); got != `{"jsonrpc":"2.0","id":"new","result":{"n":1}}` {
		t.Errorf("connection stream: %s", got)
	}
	// A repeated initialize on the connection is the engine's to answer
	// (the TypeScript SDK's client POSTs it with the connection's id and
	// reads the answer from the connection stream), not a 400.
	if r := do(t, "POST", ts.URL, withID, `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}`); r.StatusCode != 202 {
		t.Fatalf("initialize again: %d, want 202", r.StatusCode)
	}
	if got := next(main); got != `{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":1}}` {
		t.Errorf("connection stream, the repeated initialize's answer: %s", got)
	}
	// The session's update and answer come on its stream, though the
	// stream opens after the prompt was taken (they wait for it).
	if r := do(t, "POST", ts.URL, withID, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s-1"}}`); r.StatusCode != 202 {
		t.Fatalf("prompt: %d", r.StatusCode)
	}
	sess := stream("s-1")
	if got := next(sess); !strings.Contains(got, `"method":"session/update"`) {
		t.Errorf("session stream, first: %s", got)
	}
	if got := next(sess); got != `{"jsonrpc":"2.0","id":3,"result":{"sessionId":"s-1"}}` {
		t.Errorf("session stream, second: %s", got)
	}
	if r := do(t, "DELETE", ts.URL, map[string]string{HeaderConnectionID: id}, ""); r.StatusCode != 202 {
		t.Errorf("DELETE: %d", r.StatusCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for do(t, "POST", ts.URL, withID, `{"jsonrpc":"2.0","id":9,"method":"x"}`).StatusCode != 404 {
		if time.Now().After(deadline) {
			t.Fatal("the deleted connection still takes messages")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStalledClient: a connection whose client reads none of its output
// holds the engine at MaxBuffered, and is closed after StallTimeout.
func TestStalledClient(t *testing.T) {
	flood := func(ctx context.Context, id string, in io.Reader, out io.Writer) error {
		sc := bufio.NewScanner(in)
		sc.Scan()
		io.WriteString(out, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n")
		line := `{"jsonrpc":"2.0","method":"x","params":{"pad":"` + strings.Repeat("p", 1000) + `"}}` + "\n"
		for i := 0; i < 10000 && ctx.Err() == nil; i++ {
			io.WriteString(out, line)
		}
		for sc.Scan() {
		}
		return nil
	}
	s := &Server{Engine: flood, MaxBuffered: 16 << 10, StallTimeout: 200 * time.Millisecond}
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp := do(t, "POST", ts.URL, map[string]string{"Content-Type": "application/json"}, `{"jsonrpc":"2.0","id":1,"method":"initialize"}`)
	id := resp.Header.Get(HeaderConnectionID)
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.mu.Lock()
		_, open := s.conns[id]
		s.mu.Unlock()
		if !open {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a stalled connection was not closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
