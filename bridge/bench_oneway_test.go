//go:build linux || darwin

package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/legacy"
)

// One-way large messages, each direction on its own, through a WebSocket
// agent and through a child process agent: what "a 32 MiB message relayed"
// costs when only that message is in flight. (BenchmarkRelayLarge's echo
// has the request and its answer in the bridge at once.)
//
// _bench/sink takes large params and answers {}; _bench/emit {"n":N}
// answers a result of N bytes. The child agent is this test binary,
// re-executed with childAgentEnv set (see TestMain).

const childAgentEnv = "ACP_BRIDGE_BENCH_CHILD_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(childAgentEnv) == "1" {
		if err := childAgent(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench child agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// sink answers a _bench/sink request whose head has been read, reading and
// dropping the rest of it.
func sink(conn *websocket.Conn, id string, rest io.Reader, buf []byte) error {
	if _, err := io.CopyBuffer(io.Discard, rest, buf); err != nil {
		return err
	}
	return reply(conn, id, `{}`)
}

// emit answers _bench/emit with a result of n bytes, written as it goes.
func emit(conn *websocket.Conn, id string, n int) error {
	w, err := conn.NextWriter(websocket.TextMessage)
	if err != nil {
		return err
	}
	if err := writeLarge(w, `{"jsonrpc":"2.0","id":`+id+`,"result":`, n, "}"); err != nil {
		return err
	}
	return w.Close()
}

// childAgent is an ACP agent on stdio that answers what the benchmarks ask.
// It holds each request whole (its memory is its own process's, not the
// benchmark's).
func childAgent(in io.Reader, out io.Writer) error {
	br := bufio.NewReaderSize(in, 1<<20)
	bw := bufio.NewWriterSize(out, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		id := gjson.GetBytes(line, "id").Raw
		head := `{"jsonrpc":"2.0","id":` + id + `,"result":`
		switch method := gjson.GetBytes(line, "method").Str; method {
		case "initialize":
			_, err = bw.WriteString(head + `{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}` + "\n")
		case "session/new":
			_, err = bw.WriteString(head + `{"sessionId":"sess-1"}}` + "\n")
		case "_bench/sink":
			_, err = bw.WriteString(head + "{}}\n")
		case "_bench/emit":
			err = writeLarge(bw, head, int(gjson.GetBytes(line, "params.n").Int()), "}\n")
		case "_bench/echo":
			bw.WriteString(head)
			bw.WriteString(gjson.GetBytes(line, "params").Raw)
			_, err = bw.WriteString("}\n")
		default:
			if id == "" {
				continue
			}
			_, err = bw.WriteString(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"Method not found"}}` + "\n")
		}
		line = nil
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			return err
		}
	}
}

// childRelay is the bridge as internal/cli/serve.go runs it for an ACP
// agent child.
func childRelay(_ string, in io.Reader, out io.Writer) error {
	return serveACP(in, out, nil, func(ctx context.Context) (bridge.Link, error) {
		p, err := legacy.Command{
			Path:    os.Args[0],
			Env:     append(os.Environ(), childAgentEnv+"=1"),
			MaxLine: maxMessage,
		}.Start(ctx)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return p, nil
	})
}

// sendLarge sends a _bench/sink request with size bytes of params and
// reads its small answer.
func (e *editorEnd) sendLarge(size int) error {
	e.arm()
	e.id++
	written := make(chan error, 1)
	go func() {
		written <- writeLarge(e.in, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"_bench/sink","params":`, e.id), size, "}\n")
	}()
	answer, err := e.br.ReadSlice('\n')
	if werr := <-written; werr != nil {
		return fmt.Errorf("%s: writing the request: %w", e.name, werr)
	}
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", e.name, err)
	}
	if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`+"\n", e.id); string(answer) != want {
		return fmt.Errorf("%s: answer %.300q, want %q", e.name, answer, want)
	}
	return nil
}

// receiveLarge asks for an answer with size bytes of result and reads it
// without keeping it.
func (e *editorEnd) receiveLarge(size int) error {
	e.arm()
	e.id++
	if _, err := fmt.Fprintf(e.in, `{"jsonrpc":"2.0","id":%d,"method":"_bench/emit","params":{"n":%d}}`+"\n", e.id, size); err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"data":"xxx`, e.id)
	n := 0
	for {
		chunk, err := e.br.ReadSlice('\n')
		if n == 0 && !bytes.HasPrefix(chunk, []byte(head)) {
			return fmt.Errorf("%s: answer starts %.300q, want %q", e.name, chunk, head)
		}
		n += len(chunk)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: reading the answer (%d bytes so far): %w", e.name, n, err)
		}
		break
	}
	if want := len(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":`, e.id)) + size + len("}\n"); n != want {
		return fmt.Errorf("%s: answer line of %d bytes, want %d", e.name, n, want)
	}
	return nil
}

func (d *directEnd) sendLarge(size int) error {
	deadline := time.Now().Add(waitTimeout)
	d.conn.SetReadDeadline(deadline)
	d.conn.SetWriteDeadline(deadline)
	d.id++
	w, err := d.conn.NextWriter(websocket.TextMessage)
	if err != nil {
		return err
	}
	if err := writeLarge(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"_bench/sink","params":`, d.id), size, "}"); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	_, answer, err := d.conn.ReadMessage()
	if err != nil {
		return err
	}
	if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, d.id); string(answer) != want {
		return fmt.Errorf("direct: answer %q, want %q", answer, want)
	}
	return nil
}

func (d *directEnd) receiveLarge(size int) error {
	deadline := time.Now().Add(waitTimeout)
	d.conn.SetReadDeadline(deadline)
	d.conn.SetWriteDeadline(deadline)
	d.id++
	if err := d.conn.WriteMessage(websocket.TextMessage,
		fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"_bench/emit","params":{"n":%d}}`, d.id, size)); err != nil {
		return err
	}
	_, r, err := d.conn.NextReader()
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		return err
	}
	if want := len(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":`, d.id)) + size + 1; int(n) != want {
		return fmt.Errorf("direct: answer of %d bytes, want %d", n, want)
	}
	return nil
}

// BenchmarkRelayLargeOneWay relays one large message in one direction:
// to-agent (the editor's request, _bench/sink) and to-editor (the agent's
// answer, _bench/emit), through a WebSocket agent and an agent child, each
// relay freshly started. Target: peak-heap/msg ≤ 2, the bridge's peak heap
// (garbage not yet collected included) over the message size.
//
// For the WebSocket agent, which lives in this process, the same message
// sent directly is the baseline subtracted, as in BenchmarkRelayLarge. The
// child agent's memory is its own process's: nothing to subtract but the
// editor's side, which holds nothing large.
// excess-KiB is the peak minus exactly twice the message, in KiB.
func BenchmarkRelayLargeOneWay(b *testing.B) {
	type oneWay struct {
		name  string
		relay func(e *editorEnd, size int) error
		agent func(d *directEnd, size int) error
	}
	ways := []oneWay{
		{"to-agent", (*editorEnd).sendLarge, (*directEnd).sendLarge},
		{"to-editor", (*editorEnd).receiveLarge, (*directEnd).receiveLarge},
	}
	for _, transport := range []string{"ws", "child"} {
		for _, way := range ways {
			for _, size := range []int{32 << 20, 60 << 20} {
				b.Run(fmt.Sprintf("%s/%s/%dMiB", transport, way.name, size>>20), func(b *testing.B) {
					defer noLeaks(b)()
					var agent *benchAgent
					run := childRelay
					if transport == "ws" {
						agent = startAgent(b)
						defer agent.close(b)
						run = bridgeRelay
					}
					var direct, bridged heapRun
					for range b.N {
						if agent != nil {
							d := dialDirect(b, agent.url)
							r, err := measureHeap(func() error { return way.agent(d, size) })
							d.close()
							if err != nil {
								b.Fatal(err)
							}
							direct.peak = max(direct.peak, r.peak)
						}
						url := ""
						if agent != nil {
							url = agent.url
						}
						e := startRelay(b, "bridge", run, url)
						e.handshake(b)
						r, err := measureHeap(func() error { return way.relay(e, size) })
						e.close(b)
						if err != nil {
							b.Fatal(err)
						}
						// The worst run is the figure: the target is a bound.
						bridged.peak = max(bridged.peak, r.peak)
						bridged.alloc += r.alloc / float64(b.N)
						bridged.dur += r.dur / time.Duration(b.N)
					}
					msg := float64(size)
					peak := bridged.peak - direct.peak
					b.ReportMetric(float64(bridged.dur.Nanoseconds()), "ns/op")
					b.ReportMetric(peak/msg, "peak-heap/msg")
					b.ReportMetric((peak-2*msg)/1024, "excess-KiB")
					b.ReportMetric(direct.peak/msg, "agent-peak-heap/msg")
					b.ReportMetric(bridged.alloc/msg, "alloc/msg")
				})
			}
		}
	}
}
