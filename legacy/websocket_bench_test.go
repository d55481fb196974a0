package legacy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/legacy"
	"github.com/gorilla/websocket"
)

// serverTextFrame encodes payload as one final, unmasked text frame, as an
// agent (a server) sends it (RFC 6455 §5.2).
func serverTextFrame(payload []byte) []byte {
	var h []byte
	switch n := len(payload); {
	case n < 126:
		h = []byte{0x81, byte(n)}
	case n < 1<<16:
		h = []byte{0x81, 126, byte(n >> 8), byte(n)}
	default:
		h = binary.BigEndian.AppendUint64([]byte{0x81, 127}, uint64(n))
	}
	return append(h, payload...)
}

// floodAgent serves an agent that writes block to the connection over and
// over, raw, until the connection fails: the agent side then costs nothing
// but the write system calls, and allocates nothing.
func floodAgent(b *testing.B, block []byte) string {
	url, _ := wsAgent(b, false, nil, func(c *websocket.Conn, _ *http.Request) {
		nc := c.NetConn()
		for {
			if _, err := nc.Write(block); err != nil {
				return
			}
		}
	})
	return url
}

// BenchmarkWSRead measures Read alone, on the bridge's usual path: keepalive
// on and a cancellable ctx. B/op for the large case is how much the reading
// of one message allocates in all, the transient cost of a large message.
func BenchmarkWSRead(b *testing.B) {
	// A typical streamed chunk, padded to 200 bytes.
	const pre, post = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`, `"}}}}`
	small := []byte(pre + strings.Repeat("x", 200-len(pre)-len(post)) + post)
	cases := []struct {
		name string
		msg  []byte
		n    int // messages per block the agent writes
	}{
		{"small-200B", small, 512},
		{"large-32MiB", []byte(`{"data":"` + strings.Repeat("y", 32<<20-11) + `"}`), 1},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			block := bytes.Repeat(serverTextFrame(tc.msg), tc.n)
			url := floodAgent(b, block)
			c, err := legacy.WebSocket{URL: url}.Dial(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// One message first, so that connection setup is not measured.
			if _, err := c.Read(ctx); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(tc.msg)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				m, err := c.Read(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if len(m) != len(tc.msg) {
					b.Fatalf("Read = %d bytes, want %d", len(m), len(tc.msg))
				}
			}
		})
	}
}
