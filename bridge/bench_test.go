package bridge_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/ndjson"
	"github.com/acp-bridge/acp-bridge/translate/acp"
)

// streamLink is an agent link whose frames come from an NDJSON stream, the
// way a child process's stdout does.
type streamLink struct {
	r      *ndjson.Reader
	closer io.Closer
}

func (s *streamLink) Read(context.Context) ([]byte, error) { return s.r.Next() }
func (s *streamLink) Write(context.Context, []byte) error  { return nil }
func (s *streamLink) Close() error                         { return s.closer.Close() }

const benchUpdate = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"The quick brown fox jumps over the lazy dog, streaming one more token of the answer."}}}}`

// countLines reads r until n lines have arrived.
func countLines(r io.Reader, n int) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for i := 0; i < n; i++ {
		if _, err := br.ReadSlice('\n'); err != nil {
			return fmt.Errorf("line %d: %w", i, err)
		}
	}
	return nil
}

// writeFrames writes n copies of frame, one per line.
func writeFrames(w io.Writer, frame string, n int) {
	bw := bufio.NewWriterSize(w, 64<<10)
	for i := 0; i < n; i++ {
		bw.WriteString(frame)
		bw.WriteByte('\n')
	}
	bw.Flush()
}

// BenchmarkRelay measures streamed session/update notifications per second
// from an agent's NDJSON stream through the engine to the editor's stream,
// and, in the same run, the same bytes copied through one plain pipe. The
// "x-pipe" metric is the ratio of the two times: the engine's cost over the
// cheapest possible relay.
func BenchmarkRelay(b *testing.B) {
	n := b.N
	// Baseline: agent stream → editor stream through one pipe.
	pr, pw := io.Pipe()
	start := time.Now()
	go func() { writeFrames(pw, benchUpdate, n); pw.Close() }()
	if err := countLines(pr, n); err != nil {
		b.Fatal(err)
	}
	pipeTime := time.Since(start)

	// Through the engine: agent stream → link → loop → translator → editor writer.
	agentR, agentW := io.Pipe()
	editorInR, editorInW := io.Pipe()
	editorOutR, editorOutW := io.Pipe()
	newTr, _ := acp.Dialect.Configure(nil)
	br := &bridge.Bridge{
		Dialect:       acp.Dialect,
		NewTranslator: newTr,
		Dial: func(context.Context, bridge.Spawn) (bridge.Link, error) {
			return &streamLink{r: ndjson.NewReader(agentR, 0), closer: agentR}, nil
		},
	}
	served := make(chan error, 1)
	go func() { served <- br.Serve(context.Background(), editorInR, editorOutW); editorOutW.Close() }()
	out := bufio.NewReader(editorOutR)
	// The handshake is outside the timed part.
	fmt.Fprintln(editorInW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	go fmt.Fprintln(agentW, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	if _, err := out.ReadSlice('\n'); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start = time.Now()
	go func() { writeFrames(agentW, benchUpdate, n) }()
	if err := countLines(out, n); err != nil {
		b.Fatal(err)
	}
	bridgeTime := time.Since(start)
	b.StopTimer()
	editorInW.Close()
	go io.Copy(io.Discard, editorOutR)
	<-served
	agentW.Close()

	b.SetBytes(int64(len(benchUpdate) + 1))
	b.ReportMetric(float64(n)/bridgeTime.Seconds(), "msgs/s")
	b.ReportMetric(float64(n)/pipeTime.Seconds(), "pipe-msgs/s")
	b.ReportMetric(bridgeTime.Seconds()/pipeTime.Seconds(), "x-pipe")
}
