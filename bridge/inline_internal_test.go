//go:build unix

package bridge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/tidwall/gjson"
)

// answeringLink is an agent that answers every request at once.
type answeringLink struct {
	answers chan []byte
	closed  chan struct{}
	once    sync.Once
}

func (a *answeringLink) Read(ctx context.Context) ([]byte, error) {
	select {
	case f := <-a.answers:
		return f, nil
	case <-a.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (a *answeringLink) Write(ctx context.Context, frame []byte) error {
	r := gjson.GetManyBytes(frame, "id", "method")
	if !r[0].Exists() || !r[1].Exists() {
		return nil
	}
	select {
	case a.answers <- cannedAnswer(r[0].Raw, r[1].Str):
		return nil
	case <-a.closed:
		return io.ErrClosedPipe
	}
}

// cannedAnswer is a test agent's answer to request id of method: an
// initialize that speaks v1, a session "s1", an empty result for the rest.
func cannedAnswer(id, method string) []byte {
	result := `{}`
	switch method {
	case "initialize":
		result = `{"protocolVersion":1,"agentCapabilities":{}}`
	case "session/new":
		result = `{"sessionId":"s1"}`
	}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

func (a *answeringLink) Close() error {
	a.once.Do(func() { close(a.closed) })
	return nil
}

// An answer the link's goroutine handles itself (inlineAgentEvent) is
// written to the editor with the gate open: writing wakes the editor, and
// a goroutine descheduled for it while it held the gate sent the editor's
// next message through the loop, a hand-off of tens of microseconds. The
// editor's stream here is a pipe, as in the binary, and every direct write
// to it notes whether the gate could be taken.
func TestInlineWritesWithTheGateOpen(t *testing.T) {
	var open, closed atomic.Int64
	testHookEditorDirect = func(e *engine, write func([]byte) (int, error)) func([]byte) (int, error) {
		return func(b []byte) (int, error) {
			if e.gate.TryLock() {
				e.gate.Unlock()
				open.Add(1)
			} else {
				closed.Add(1)
			}
			return write(b)
		}
	}
	defer func() { testHookEditorDirect = nil }()

	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	inR, inW := io.Pipe()
	newTr, diags := acp.Dialect.Configure(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	dialed := make(chan *answeringLink, 1)
	b := &Bridge{
		Dialect:       acp.Dialect,
		NewTranslator: newTr,
		AgentName:     "answering",
		Version:       "test",
	}
	b.Dial = func(context.Context, Spawn) (Link, error) {
		a := &answeringLink{answers: make(chan []byte, 16), closed: make(chan struct{})}
		dialed <- a
		return a, nil
	}
	served := make(chan error, 1)
	go func() {
		served <- b.Serve(context.Background(), inR, outW)
		outW.Close()
	}()
	out := bufio.NewReader(outR)
	call := func(id int, method, params string) {
		t.Helper()
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", method, err)
		}
		if got := gjson.Get(line, "id").Int(); got != int64(id) || !gjson.Get(line, "result").Exists() {
			t.Fatalf("%s: got %s", method, line)
		}
	}
	call(0, "initialize", `{"protocolVersion":1,"clientCapabilities":{}}`)
	call(1, "session/new", `{"cwd":"/tmp","mcpServers":[]}`)
	<-dialed
	for i := range 200 {
		call(2+i, "_test/echo", `{"sessionId":"s1"}`)
		if open.Load() > 0 && i >= 20 {
			break
		}
	}
	endServe(t, inW, served)
	if open.Load()+closed.Load() == 0 {
		t.Fatal("no answer was written directly: the editor's pipe did not take the direct path")
	}
	if open.Load() == 0 {
		t.Errorf("all %d direct writes to the editor were made holding the gate; an answer handled where it was read must be written after the gate opens", closed.Load())
	}
}
