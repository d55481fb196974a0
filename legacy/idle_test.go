package legacy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/legacy"
)

// idleConn is a link whose Read says when it is about to wait.
type idleConn interface {
	Read(context.Context) ([]byte, error)
	Write(context.Context, []byte) error
	OnIdle(func())
}

// checkIdle checks OnIdle's promise on an echoing link: whenever Read is
// about to wait, the function is called first, on Read's goroutine, so a
// caller holding output back may flush it there.
func checkIdle(t *testing.T, c idleConn) {
	reading := make(chan bool, 1) // a Read is running
	reading <- false
	idle := make(chan struct{}, 1)
	c.OnIdle(func() {
		if !<-reading {
			t.Error("OnIdle's function called outside Read")
		}
		reading <- true
		select {
		case idle <- struct{}{}:
		default:
		}
	})
	read := func() []byte {
		<-reading
		reading <- true
		got, err := readWithin(t, c, 5*time.Second)
		<-reading
		reading <- false
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		return got
	}
	for round := range 3 {
		// Nothing to read: a Read must call it, then wait.
		select {
		case <-idle:
		default:
		}
		got := make(chan []byte, 1)
		go func() { got <- read() }()
		select {
		case <-idle:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: a Read waiting for the agent did not call OnIdle's function", round)
		}
		want := fmt.Sprintf(`{"round":%d}`, round)
		if err := c.Write(t.Context(), []byte(want)); err != nil {
			t.Fatal(err)
		}
		if g := <-got; string(g) != want {
			t.Fatalf("round %d: Read = %s, want %s", round, g, want)
		}
	}
}

func TestWebSocketOnIdle(t *testing.T) {
	url, _ := wsAgent(t, false, nil, echo)
	checkIdle(t, dial(t, legacy.WebSocket{URL: url}))
}
