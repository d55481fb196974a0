//go:build unix

package legacy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/acp-bridge/acp-bridge/legacy"
)

// tryConn is a link that can write without waiting.
type tryConn interface {
	TryWrite([]byte) (taken, held bool)
	Flush(context.Context) error
	Write(context.Context, []byte) error
}

// checkTryWrite fills a link whose peer does not read yet with frames
// written by TryWrite until one is held, checks that TryWrite then takes
// nothing, lets a Flush and a Write finish in the background, and then
// has the peer read (recv): every frame must arrive whole, once, in order.
func checkTryWrite(t *testing.T, c tryConn, recv func() string) {
	t.Helper()
	pad := strings.Repeat("x", 16<<10)
	frame := func(i int) []byte { return fmt.Appendf(nil, `{"seq":%d,"pad":%q}`, i, pad) }
	n, held := 0, false
	for !held {
		var taken bool
		taken, held = c.TryWrite(frame(n))
		if !taken {
			t.Fatalf("TryWrite refused frame %d with nothing held", n)
		}
		n++
		if n > 10000 {
			t.Fatal("TryWrite never held anything: the peer took 160 MB unread")
		}
	}
	if taken, _ := c.TryWrite(frame(n)); taken {
		t.Fatal("TryWrite took a frame while bytes were held: it must refuse until they are flushed")
	}
	done := make(chan error, 1)
	go func() {
		if err := c.Flush(t.Context()); err != nil {
			done <- err
			return
		}
		done <- c.Write(t.Context(), frame(n))
	}()
	for i := range n + 1 {
		got := recv()
		var f struct{ Seq int }
		if err := json.Unmarshal([]byte(got), &f); err != nil || f.Seq != i {
			t.Fatalf("message %d arrived as %.80q (%v): want frame %d whole", i, got, err, i)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Flush, then Write: %v", err)
	}
	// Nothing held now: a frame is taken at once again.
	if taken, held := c.TryWrite(frame(n + 1)); !taken || held {
		t.Fatalf("after the flush, TryWrite = %v, %v: want taken, nothing held", taken, held)
	}
	if got := recv(); !strings.HasPrefix(got, fmt.Sprintf(`{"seq":%d,`, n+1)) {
		t.Fatalf("last message = %.80q", got)
	}
}

func TestWebSocketTryWrite(t *testing.T) {
	msgs := make(chan string)
	start := make(chan struct{})
	url, _ := wsAgent(t, false, nil, func(c *websocket.Conn, _ *http.Request) {
		<-start // not reading yet: the socket fills up
		for {
			_, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			msgs <- string(b)
		}
	})
	c := dial(t, legacy.WebSocket{URL: url})
	started := false
	checkTryWrite(t, c, func() string {
		if !started {
			close(start)
			started = true
		}
		select {
		case m := <-msgs:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("the agent got nothing more")
			return ""
		}
	})
}

func TestProcessTryWrite(t *testing.T) {
	// The child echoes its stdin; until the test reads its stdout, both
	// pipes fill up.
	p, _ := startChild(t, "echo", nil)
	checkTryWrite(t, p, func() string {
		b, err := readWithin(t, p, 10*time.Second)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		return string(b)
	})
}
