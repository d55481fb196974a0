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
	"time"

	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/tidwall/gjson"
)

// burstLink is an agent whose frames come in bursts: its Read returns a
// burst's frames one after the other without waiting, as a child's pump
// or a socket's buffer does, and counts the times it has none left.
type burstLink struct {
	more   chan struct{} // capacity 1: frames were queued
	closed chan struct{}
	once   sync.Once

	mu      sync.Mutex
	pending [][]byte
	prompt  string // the id of the prompt request, once it came
	// endless, when set, is what Read returns when nothing is pending,
	// at once: an agent that always has another update ready.
	endless []byte

	waits atomic.Int64
	// idle, when set (lendingLink), is called before Read waits.
	idle func()
}

// queue adds frames for Read, all at once.
func (a *burstLink) queue(frames ...[]byte) {
	a.mu.Lock()
	a.pending = append(a.pending, frames...)
	a.mu.Unlock()
	select {
	case a.more <- struct{}{}:
	default:
	}
}

func (a *burstLink) Read(ctx context.Context) ([]byte, error) {
	for {
		a.mu.Lock()
		if len(a.pending) > 0 {
			f := a.pending[0]
			a.pending = a.pending[1:]
			a.mu.Unlock()
			return f, nil
		}
		if f := a.endless; f != nil {
			a.mu.Unlock()
			return f, nil
		}
		a.mu.Unlock()
		a.waits.Add(1)
		if a.idle != nil {
			a.idle()
		}
		select {
		case <-a.more:
		case <-a.closed:
			return nil, io.EOF
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (a *burstLink) Write(ctx context.Context, frame []byte) error {
	r := gjson.GetManyBytes(frame, "id", "method")
	if !r[0].Exists() || !r[1].Exists() {
		return nil
	}
	if r[1].Str == "session/prompt" {
		a.mu.Lock()
		a.prompt = r[0].Raw
		a.mu.Unlock()
		return nil // answered by the test, after its bursts
	}
	a.queue(cannedAnswer(r[0].Raw, r[1].Str))
	return nil
}

func (a *burstLink) Close() error {
	a.once.Do(func() { close(a.closed) })
	return nil
}

// serveBurstLink runs Serve with a burstLink for its agent and a pipe for
// the editor's output, as in the binary. It returns the
// editor's input and output, the link once dialed, and Serve's result.
func serveBurstLink(t *testing.T) (in *io.PipeWriter, out *os.File, dialed <-chan *burstLink, served <-chan error) {
	t.Helper()
	links := make(chan *burstLink, 1)
	b := &Bridge{AgentName: "bursts"}
	b.Dial = func(context.Context, Spawn) (Link, error) {
		a := newBurstLink()
		links <- a
		return a, nil
	}
	in, out, served = serveOnPipes(t, b)
	return in, out, links, served
}

func newBurstLink() *burstLink {
	return &burstLink{more: make(chan struct{}, 1), closed: make(chan struct{})}
}

// serveOnPipes runs b.Serve for the acp dialect, its Dial set by the
// caller, with a pipe for the editor's output, as in the binary. It
// returns the editor's input and output, and Serve's result.
func serveOnPipes(t *testing.T, b *Bridge) (in *io.PipeWriter, out *os.File, served <-chan error) {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outR.Close() })
	inR, inW := io.Pipe()
	newTr, diags := acp.Dialect.Configure(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	b.Dialect, b.NewTranslator, b.Version = acp.Dialect, newTr, "test"
	done := make(chan error, 1)
	go func() {
		done <- b.Serve(context.Background(), inR, outW)
		outW.Close()
	}()
	return inW, outR, done
}

// endServe closes the editor's input and waits for Serve to return
// without an error.
func endServe(t *testing.T, in *io.PipeWriter, served <-chan error) {
	t.Helper()
	in.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the editor's input ended")
	}
}

// waitPrompt waits for the editor's prompt to reach the agent.
func (a *burstLink) waitPrompt() {
	for {
		a.mu.Lock()
		id := a.prompt
		a.mu.Unlock()
		if id != "" {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// An agent that streams without a pause never lets its link's read wait:
// the loop must still take the editor's requests between the stream's
// frames, and answer them while the stream goes on.
func TestTheLoopAnswersDuringAStreamThatNeverPauses(t *testing.T) {
	inW, outR, dialed, served := serveBurstLink(t)
	// The editor reads everything, and hands on the answers.
	answers := make(chan string, 16)
	updates := atomic.Int64{}
	go func() {
		out := bufio.NewReader(outR)
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				close(answers)
				return
			}
			if gjson.Get(line, "method").Str == "session/update" {
				updates.Add(1)
				continue
			}
			answers <- line
		}
	}()
	call := func(id int, method, params string) {
		t.Helper()
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		select {
		case line := <-answers:
			if gjson.Get(line, "id").Int() != int64(id) || !gjson.Get(line, "result").Exists() {
				t.Fatalf("%s: got %s", method, line)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer within 10 s while the agent streams (%d updates so far)", method, updates.Load())
		}
	}
	call(0, "initialize", `{"protocolVersion":1,"clientCapabilities":{}}`)
	call(1, "session/new", `{"cwd":"/tmp","mcpServers":[]}`)
	agent := <-dialed
	fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"go"}]}}`+"\n")
	agent.waitPrompt()

	// The stream: the agent always has another update ready.
	update := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"more"}}}}`)
	agent.mu.Lock()
	agent.endless = update
	agent.mu.Unlock()
	agent.queue() // (wakes a Read that waits)
	waitsBefore := agent.waits.Load()
	for deadline := time.Now().Add(10 * time.Second); updates.Load() < 2000; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d updates in 10 s: the stream did not start", updates.Load())
		}
	}
	before := updates.Load()
	for i := range 20 {
		call(10+i, "_test/echo", `{"sessionId":"s1"}`)
	}
	agent.mu.Lock()
	agent.endless = nil
	promptID := agent.prompt
	agent.mu.Unlock()
	if waits := agent.waits.Load() - waitsBefore; waits != 0 {
		t.Errorf("the link's read waited %d times during the stream: the test did not stream without a pause", waits)
	}
	agent.queue(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`, promptID))
	select {
	case line := <-answers:
		if gjson.Get(line, "id").Int() != 2 {
			t.Fatalf("after the stream = %s, want the prompt's answer", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the prompt")
	}
	if n := updates.Load() - before; n < 1000 {
		t.Errorf("only %d updates streamed while the editor's requests were answered", n)
	}
	endServe(t, inW, served)
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
