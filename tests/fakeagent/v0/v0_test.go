package v0

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"
)

// peer drives Serve over pipes as the bridge would.
type peer struct {
	t    *testing.T
	w    *io.PipeWriter
	r    *bufio.Reader
	done chan error
	dir  string
}

func startPeer(t *testing.T, cfg Config) *peer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cfg.JournalDir = t.TempDir()
	p := &peer{t: t, w: inW, r: bufio.NewReader(outR), done: make(chan error, 1), dir: cfg.JournalDir}
	go func() {
		err := Serve(inR, outW, cfg)
		outW.Close()
		p.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		// Drain so Serve never blocks on a write while stopping.
		go io.Copy(io.Discard, outR)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return after stdin EOF")
		}
	})
	return p
}

func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.w, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

func (p *peer) expect(want string) {
	p.t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := p.r.ReadString('\n')
		ch <- res{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			p.t.Fatalf("reading agent output: %v (want %s)", r.err, want)
		}
		if got := strings.TrimSuffix(r.s, "\n"); got != want {
			p.t.Fatalf("agent wrote\n\t%s\nwant\n\t%s", got, want)
		}
	case <-time.After(5 * time.Second):
		p.t.Fatalf("agent wrote nothing; want %s", want)
	}
}

func (p *peer) journal() Journal {
	p.t.Helper()
	js, err := ReadJournals(p.dir)
	if err != nil || len(js) != 1 {
		p.t.Fatalf("ReadJournals: %d journals, %v", len(js), err)
	}
	return js[0]
}

// The captured Gemini CLI 0.1.16 approval session
// (docs/agent-protocols.md#acp-v0-captured-session), byte for byte where the capture
// gives the frames.
func TestCapturedApprovalSession(t *testing.T) {
	p := startPeer(t, Config{Banner: true})
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"0.0.9"}}`)
	p.expect(`Data collection is disabled.`)
	p.expect(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"0.0.9","isAuthenticated":true}}`)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"sendUserMessage","params":{"chunks":[{"text":"run echo please"}]}}`)
	p.expect(`{"jsonrpc":"2.0","id":0,"method":"streamAssistantMessageChunk","params":{"chunk":{"thought":"Let me check"}}}`)
	p.send(`{"jsonrpc":"2.0","id":0,"result":null}`)
	p.expect(`{"jsonrpc":"2.0","id":1,"method":"streamAssistantMessageChunk","params":{"chunk":{"text":"I will run a command."}}}`)
	p.send(`{"jsonrpc":"2.0","id":1,"result":null}`)
	p.expect(`{"jsonrpc":"2.0","id":2,"method":"requestToolCallConfirmation","params":{"label":"echo hi-from-tool (say hi)","icon":"terminal","content":null,"confirmation":{"type":"execute","rootCommand":"echo","command":"echo hi-from-tool"},"locations":[]}}`)
	p.send(`{"jsonrpc":"2.0","id":2,"result":{"id":1,"outcome":"allow"}}`)
	p.expect(`{"jsonrpc":"2.0","id":3,"method":"updateToolCall","params":{"toolCallId":1,"status":"finished","content":{"type":"markdown","markdown":"hi-from-tool\n"}}}`)
	p.send(`{"jsonrpc":"2.0","id":3,"result":null}`)
	p.expect(`{"jsonrpc":"2.0","id":4,"method":"streamAssistantMessageChunk","params":{"chunk":{"thought":"Thinking about result"}}}`)
	p.expect(`{"jsonrpc":"2.0","id":5,"method":"streamAssistantMessageChunk","params":{"chunk":{"text":"Done."}}}`)
	p.expect(`{"jsonrpc":"2.0","id":1,"result":null}`)
	p.send(`{"jsonrpc":"2.0","id":4,"result":null}`)
	p.send(`{"jsonrpc":"2.0","id":5,"result":null}`)

	// Idle cancel, then an answer the agent never asked for: both journaled.
	p.send(`{"jsonrpc":"2.0","id":2,"method":"cancelSendMessage"}`)
	p.expect(`{"jsonrpc":"2.0","id":2,"error":` + IdleCancelError + `}`)
	p.send(`{"jsonrpc":"2.0","id":5,"result":null}`)
	waitFor(t, func() bool { return len(p.journal().Violations()) == 1 })
	j := p.journal()
	if !j.HasEvent("outcome allow") || !j.HasEvent("cancel while idle") {
		t.Errorf("events = %q", j.Events)
	}
	if v := j.Violations(); !strings.Contains(v[0], "id 5") {
		t.Errorf("violations = %q, want the duplicate answer to id 5", v)
	}
}

func TestCancelAndRejectAndViolations(t *testing.T) {
	p := startPeer(t, Config{Unauthenticated: true})
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"0.0.9"}}`)
	p.expect(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"0.0.9","isAuthenticated":false}}`)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"sendUserMessage","params":{"chunks":[{"text":"run echo please"}]}}`)
	p.expect(`{"jsonrpc":"2.0","id":0,"method":"streamAssistantMessageChunk","params":{"chunk":{"thought":"Let me check"}}}`)
	p.expect(`{"jsonrpc":"2.0","id":1,"method":"streamAssistantMessageChunk","params":{"chunk":{"text":"I will run a command."}}}`)
	p.expect(`{"jsonrpc":"2.0","id":2,"method":"requestToolCallConfirmation","params":` + ConfirmParams + `}`)
	p.send(`{"jsonrpc":"2.0","id":2,"result":{"id":1,"outcome":"reject"}}`)
	p.expect(`{"jsonrpc":"2.0","id":3,"method":"streamAssistantMessageChunk","params":{"chunk":{"text":"` + RejectedText + `"}}}`)
	p.expect(`{"jsonrpc":"2.0","id":1,"result":null}`)

	p.send(`{"jsonrpc":"2.0","id":2,"method":"sendUserMessage","params":{"chunks":[{"text":"slow"}]}}`)
	p.expect(`{"jsonrpc":"2.0","id":4,"method":"streamAssistantMessageChunk","params":{"chunk":{"text":"tick 1 "}}}`)
	p.send(`{"jsonrpc":"2.0","id":3,"method":"cancelSendMessage"}`)
	// Ticks may be written before the cancel is read.
	for {
		s, err := p.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s, "tick") {
			if got, want := strings.TrimSpace(s), `{"jsonrpc":"2.0","id":3,"result":null}`; got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
			break
		}
	}
	p.expect(`{"jsonrpc":"2.0","id":2,"error":` + AbortedError + `}`)

	p.send(`{"jsonrpc":"2.0","id":4,"method":"sendUserMessage","params":{"chunks":[{"text":"429"}]}}`)
	p.expect(`{"jsonrpc":"2.0","id":4,"error":` + RateLimitError + `}`)

	p.send(`{"jsonrpc":"2.0","id":9,"method":"authenticate","params":{}}`)
	p.expect(`{"jsonrpc":"2.0","id":9,"result":null}`)
	waitFor(t, func() bool { return len(p.journal().Violations()) == 2 })
	if v := p.journal().Violations(); !strings.Contains(v[0], "request id 9, want 5") || !strings.Contains(v[1], "authenticate with params") {
		t.Errorf("violations = %q", v)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A request sent right behind initialize, before its answer, is refused and
// recorded as a violation; once initialize is answered it is served.
func TestNothingServedBeforeInitializeIsAnswered(t *testing.T) {
	p := startPeer(t, Config{})
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"0.0.9"}}`)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"sendUserMessage","params":{"chunks":[{"text":"429"}]}}`)
	p.expect(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"details":"The connection must be initialized before 'sendUserMessage'"}}}`)
	p.expect(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"0.0.9","isAuthenticated":true}}`)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"sendUserMessage","params":{"chunks":[{"text":"429"}]}}`)
	p.expect(`{"jsonrpc":"2.0","id":2,"error":` + RateLimitError + `}`)
	waitFor(t, func() bool { return len(p.journal().Violations()) == 1 })
	if v := p.journal().Violations(); !strings.Contains(v[0], "sendUserMessage before initialize was answered") {
		t.Errorf("violations = %q", v)
	}
}
