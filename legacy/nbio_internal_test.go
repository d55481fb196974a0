//go:build linux

package legacy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/nbio"
)

// TestNbioCarriesTheAgentsBytes: on Linux a child's pipes and an agent's
// WebSocket connection are read and written through nbio (see package
// nbio for why), and what passes through them arrives whole.
func TestNbioCarriesTheAgentsBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	p := startTestChild(t, "echo")
	if _, ok := p.stdinW.(*nbio.File); !ok {
		t.Errorf("the child's stdin is written through %T, not nbio", p.stdinW)
	}
	if _, ok := p.stdoutR.(*nbio.File); !ok {
		t.Errorf("the child's stdout is read through %T, not nbio", p.stdoutR)
	}
	for i := range 2000 {
		want := fmt.Sprintf(`{"i":%d,"pad":"%0*d"}`, i, i%3000, 0)
		if err := p.Write(ctx, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := p.Read(ctx)
		if err != nil || string(got) != want {
			t.Fatalf("echo %d: %.60q, %v", i, got, err)
		}
	}

	var stream []byte
	for i := range 50 {
		stream = append(stream, frame(fin|opText, fmt.Appendf(nil, `{"i":%d}`, i))...)
	}
	url, done := rawAgent(t, stream, 7)
	defer func() { <-done }()
	c, err := WebSocket{URL: url, PongWait: -1}.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.dc.nb == nil {
		t.Fatal("the WebSocket's connection is not read and written through nbio")
	}
	for i := range 50 {
		m, err := c.Read(ctx)
		if err != nil || string(m) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("message %d: %q, %v", i, m, err)
		}
	}
}
