package demo

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"
)

// lmcPeer plays the bridge against the demo agent over a real WebSocket.
type lmcPeer struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialAgent(t *testing.T, a *Agent) *lmcPeer {
	t.Helper()
	srv := httptest.NewServer(a)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ws.Close()
		a.Close()
		srv.Close()
	})
	return &lmcPeer{t: t, ws: ws}
}

func (p *lmcPeer) send(frames ...string) {
	p.t.Helper()
	for _, f := range frames {
		if err := p.ws.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
			p.t.Fatal(err)
		}
	}
}

func (p *lmcPeer) read() gjson.Result {
	p.t.Helper()
	p.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := p.ws.ReadMessage()
	if err != nil {
		p.t.Fatalf("reading from the agent: %v", err)
	}
	if !json.Valid(b) || gjson.GetBytes(b, "jsonrpc").Exists() {
		p.t.Fatalf("frame %s is not LMC JSON", b)
	}
	return gjson.ParseBytes(b)
}

// readUntil reads frames until one matches, returning those before it too.
func (p *lmcPeer) readUntil(match func(gjson.Result) bool) []gjson.Result {
	p.t.Helper()
	var seen []gjson.Result
	for {
		f := p.read()
		seen = append(seen, f)
		if match(f) {
			return seen
		}
	}
}

func triple(kind, content string) []string {
	if kind == "message" {
		return []string{`{"role":"user","start":true}`, `{"role":"user","type":"message","content":"` + content + `"}`, `{"role":"user","end":true}`}
	}
	return []string{`{"role":"user","type":"command","start":true}`, `{"role":"user","type":"command","content":"` + content + `"}`, `{"role":"user","type":"command","end":true}`}
}

func isComplete(f gjson.Result) bool {
	return f.Get("role").Str == "server" && f.Get("type").Str == "status" && f.Get("content").Str == "complete"
}

func TestAgent_FilesTurnWaitsForGo(t *testing.T) {
	p := dialAgent(t, &Agent{Dir: t.TempDir()})
	p.send(`{"auth":"any"}`)
	if f := p.read(); !f.Get("auth").Bool() {
		t.Fatalf("auth answered %s", f.Raw)
	}
	p.send(triple("message", "list the files")...)
	// Text, a shell code block, then "complete" with the code not run.
	seen := p.readUntil(isComplete)
	var code, text string
	for _, f := range seen {
		switch f.Get("type").Str {
		case "code":
			code += f.Get("content").Str
		case "message":
			text += f.Get("content").Str
		}
	}
	if code != "ls -la" || !strings.Contains(text, "files") {
		t.Errorf("before approval: code %q, text %q", code, text)
	}
	p.send(triple("command", "go")...)
	seen = p.readUntil(isComplete)
	if seen[0].Get("type").Str != "console" || !strings.Contains(seen[len(seen)-3].Get("content").Str+seen[len(seen)-2].Get("content").Str, "entries") {
		t.Errorf("after go: %v", seen)
	}
}

func TestAgent_CountStopsOnStop(t *testing.T) {
	p := dialAgent(t, &Agent{})
	p.send(`{"auth":""}`)
	p.read()
	p.send(triple("message", "count slowly to 20")...)
	p.readUntil(func(f gjson.Result) bool { return f.Get("content").Str == " 1" })
	start := time.Now()
	p.send(triple("command", "stop")...)
	p.readUntil(isComplete)
	if d := time.Since(start); d > time.Second {
		t.Errorf("the count ended %v after stop", d)
	}
}

func TestAgent_RefusesAFirstFrameWithoutAuth(t *testing.T) {
	p := dialAgent(t, &Agent{})
	p.send(`{"role":"user","start":true}`)
	if f := p.read(); f.Raw != `{"auth":false}` {
		t.Errorf("agent answered %s", f.Raw)
	}
}
