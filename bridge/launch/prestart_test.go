package launch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/translate"
)

// fakeLink is a Link that counts its closes.
type fakeLink struct {
	n      int
	closed atomic.Int32
}

func (l *fakeLink) Read(context.Context) ([]byte, error) { return nil, errors.New("fake") }
func (l *fakeLink) Write(context.Context, []byte) error  { return nil }
func (l *fakeLink) Close() error                         { l.closed.Add(1); return nil }

// spawned reports whether l was the nth dial.
func (l *fakeLink) spawned(n int) bool { return l.n == n }

func (l *fakeLink) closes() int32 { return l.closed.Load() }

func (l *fakeLink) waitClosed(t *testing.T, want int32) {
	t.Helper()
	waitFor(t, func() bool { return l.closes() == want })
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// countingDial dials fakeLinks, numbered from 1, after gate is closed
// (nil: at once) unless its context ends first, and records the Spawns it
// was asked for.
type countingDial struct {
	mu     sync.Mutex
	spawns []bridge.Spawn
	links  []*fakeLink
	gate   chan struct{}
}

func (d *countingDial) dial(ctx context.Context, sp bridge.Spawn) (bridge.Link, error) {
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.spawns = append(d.spawns, sp)
	l := &fakeLink{n: len(d.spawns)}
	d.links = append(d.links, l)
	return l, nil
}

func (d *countingDial) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.spawns)
}

// The first control link the engine asks for is the one dialled at once;
// every other dial, of a session's link or of a control link again (after
// a reconnect), is a dial of its own.
func TestPrestart_FirstControlLinkIsTheEarlyOne(t *testing.T) {
	d := &countingDial{}
	dial, stop := Prestart(context.Background(), d.dial)
	defer stop()
	waitFor(t, func() bool { return d.count() == 1 })

	l, err := dial(context.Background(), bridge.Spawn{})
	if err != nil || !l.(*fakeLink).spawned(1) {
		t.Fatalf("the first control dial got %v, %v; want the early link", l, err)
	}
	if d.count() != 1 {
		t.Fatalf("%d dials, want the early one only", d.count())
	}
	for _, sp := range []bridge.Spawn{
		{Session: "s1", Cwd: "/w"},
		{Command: translate.Spawn{Argv: []string{"--x"}}},
		{Command: translate.Spawn{Env: []string{"A=b"}}},
		{}, // a control link again
	} {
		l, err := dial(context.Background(), sp)
		if err != nil || l.(*fakeLink).spawned(1) {
			t.Fatalf("dial %+v got the early link (or %v): every dial after the first control one is its own", sp, err)
		}
	}
	if d.count() != 5 {
		t.Fatalf("%d dials, want 5", d.count())
	}
	stop()
	if n := d.links[0].closes(); n != 0 {
		t.Errorf("stop closed the early link %d times after the engine took it", n)
	}
}

// A control dial that comes while the early dial is still running waits
// for it, and only one of several concurrent ones gets it.
func TestPrestart_ConcurrentTakersGetItOnce(t *testing.T) {
	d := &countingDial{gate: make(chan struct{})}
	dial, stop := Prestart(context.Background(), d.dial)
	defer stop()
	results := make(chan *fakeLink, 4)
	for range 4 {
		go func() {
			l, _ := dial(context.Background(), bridge.Spawn{})
			results <- l.(*fakeLink)
		}()
	}
	close(d.gate)
	early := 0
	for range 4 {
		if (<-results).spawned(1) {
			early++
		}
	}
	if early != 1 {
		t.Fatalf("%d callers got the early link, want exactly one", early)
	}
}

// Nothing took the early link (the editor left before its initialize):
// stop closes it. A taker that gave up waiting has it closed when it comes.
func TestPrestart_UnclaimedLinkIsClosed(t *testing.T) {
	d := &countingDial{}
	_, stop := Prestart(context.Background(), d.dial)
	waitFor(t, func() bool { return d.count() == 1 })
	stop()
	d.links[0].waitClosed(t, 1)

	d = &countingDial{gate: make(chan struct{})}
	dial, stop := Prestart(context.Background(), d.dial)
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := dial(ctx, bridge.Spawn{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled taker got %v, want its context's error", err)
	}
	close(d.gate)
	waitFor(t, func() bool { return d.count() == 1 })
	d.links[0].waitClosed(t, 1)
}
