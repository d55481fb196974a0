package legacy_test

import (
	"context"
	"fmt"
	"strings"
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

func TestProcessOnIdle(t *testing.T) {
	p, _ := startChild(t, "echo", nil)
	checkIdle(t, p)
}

// A child that closes its stdout but runs on makes Read wait for its exit
// (up to exitNoticeWait) once the last line is read: that wait is a wait
// like any other, which OnIdle's function must come before (a caller
// holding a lock until then would hold it for the whole wait).
func TestProcessOnIdleBeforeWaitingForTheExit(t *testing.T) {
	p, _ := startChild(t, "closeout", nil)
	idled := make(chan struct{}, 16)
	p.OnIdle(func() { idled <- struct{}{} })
	if got, err := readWithin(t, p, 5*time.Second); err != nil || string(got) != `{"ready":true}` {
		t.Fatalf("Read = %s, %v; want the child's ready line", got, err)
	}
	// Let the end of stdout reach the reader first, so that no wait for
	// output comes before the wait for the exit.
	time.Sleep(300 * time.Millisecond)
	for len(idled) > 0 {
		<-idled
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Read(t.Context())
		done <- err
	}()
	select {
	case <-idled:
	case err := <-done:
		t.Fatalf("Read returned %v without calling OnIdle's function before it waited for the child's exit", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Read waiting for the child's exit did not call OnIdle's function")
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "closed its stdout") {
		t.Fatalf("Read = %v, want that the agent closed its stdout", err)
	}
}
