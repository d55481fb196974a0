//go:build unix

package bridge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// lendingLink is a burstLink that can hold the loop's lent sink, as a
// child's and a WebSocket's connections can: it tells its reader when it
// is about to wait (OnIdle) and lends the frames it reads (ReadBorrowed)
// from one buffer, which it scribbles over before every read, so that a
// borrowed frame kept past its read shows as garbage.
type lendingLink struct {
	*burstLink
	buf []byte
}

func (a *lendingLink) OnIdle(f func()) { a.idle = f }

func (a *lendingLink) ReadBorrowed(ctx context.Context) ([]byte, bool, error) {
	for i := range a.buf {
		a.buf[i] = 'X'
	}
	f, err := a.Read(ctx)
	if err != nil {
		return nil, false, err
	}
	a.buf = append(a.buf[:0], f...)
	return a.buf, true, nil
}

// serveLendingLink is serveBurstLink with a lendingLink (lend: false keeps
// the loop from lending, for comparison).
func serveLendingLink(t *testing.T, lend bool) (b *Bridge, in *io.PipeWriter, out *os.File, dialed <-chan *lendingLink, served <-chan error) {
	t.Helper()
	links := make(chan *lendingLink, 1)
	b = &Bridge{AgentName: "lending", noLend: !lend}
	b.Dial = func(context.Context, Spawn) (Link, error) {
		a := &lendingLink{burstLink: newBurstLink()}
		links <- a
		return a, nil
	}
	in, out, served = serveOnPipes(t, b)
	return b, in, out, links, served
}

// A turn's stream through a link that can hold the lent sink: its plain
// chunks pass under the lease from the reader's own buffer, the other
// frames (an update the scanner does not read as plain, a permission
// request) through the loop, and the editor gets all of them, whole, in
// the agent's order, with the answer last; the same with lending off.
func TestLend_AStreamReachesTheEditorInOrderFromBorrowedFrames(t *testing.T) {
	for _, lend := range []bool{true, false} {
		t.Run(fmt.Sprintf("lend=%v", lend), func(t *testing.T) {
			b, inW, outR, dialed, served := serveLendingLink(t, lend)
			lines := make(chan string, 64)
			go func() {
				out := bufio.NewReader(outR)
				for {
					line, err := out.ReadString('\n')
					if err != nil {
						close(lines)
						return
					}
					lines <- line
				}
			}()
			next := func() string {
				t.Helper()
				select {
				case l := <-lines:
					return l
				case <-time.After(10 * time.Second):
					t.Fatal("the editor got nothing for 10 s")
					return ""
				}
			}
			fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
			next()
			fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
			next()
			agent := <-dialed
			// The editor writes on a goroutine of its own, as editors do:
			// a reader of the output that waited for its own write to be
			// taken would stall the bridge's output, and so itself.
			toBridge := make(chan string, 64)
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				for line := range toBridge {
					fmt.Fprint(inW, line)
				}
			}()
			fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"go"}]}}`)
			agent.waitPrompt()

			// Bursts of plain chunks, each burst then one frame the loop
			// must handle: a chunk with a member the scanner does not
			// read as plain, or a permission request, answered below.
			var want []string
			for burst := range 40 {
				var frames [][]byte
				for i := range 50 {
					text := fmt.Sprintf("b%d-%d", burst, i)
					if i%17 == 5 {
						// Longer than a run takes (runBytes/4), and
						// now and then longer than a whole run.
						text += strings.Repeat("x", 20<<10*(1+i%3))
					}
					want = append(want, text)
					frames = append(frames, fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`, text))
				}
				text := fmt.Sprintf("b%d-odd", burst)
				want = append(want, text)
				if burst%4 == 3 {
					frames = append(frames, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":%q},"options":[{"optionId":"y","name":"Yes","kind":"allow_once"}]}}`, 900+burst, text))
				} else {
					frames = append(frames, fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q,"annotations":{}}}}}`, text))
				}
				agent.queue(frames...)
			}
			var got []string
			for len(got) < len(want) {
				line := next()
				switch gjson.Get(line, "method").Str {
				case "session/update":
					got = append(got, gjson.Get(line, "params.update.content.text").Str)
				case "session/request_permission":
					got = append(got, gjson.Get(line, "params.toolCall.toolCallId").Str)
					toBridge <- fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"y"}}}`+"\n", gjson.Get(line, "id").Raw)
				default:
					t.Fatalf("during the stream the editor got %s", line)
				}
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("update %d: got %q, want %q (garbage: a borrowed frame kept past its read; another: out of order)", i, truncateString(got[i]), truncateString(want[i]))
					}
				}
			}
			agent.mu.Lock()
			promptID := agent.prompt
			agent.mu.Unlock()
			agent.queue(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`, promptID))
			if line := next(); gjson.Get(line, "id").Int() != 2 {
				t.Fatalf("after the stream = %s, want the prompt's answer", line)
			}
			close(toBridge)
			<-wrote
			endServe(t, inW, served)
			lent := b.lentChunks.Load()
			if lend && lent == 0 {
				t.Error("no chunk passed under a lease: the test did not exercise the lent sink")
			}
			if !lend && lent != 0 {
				t.Errorf("%d chunks passed under a lease with lending off", lent)
			}
			t.Logf("%d of %d chunks under a lease", lent, len(want))
		})
	}
}

func truncateString(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
