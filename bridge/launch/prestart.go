package launch

import (
	"context"
	"sync"

	"github.com/acp-bridge/acp-bridge/bridge"
)

// Dial is what Bridge.Dial holds: it opens one agent link.
type Dial = func(ctx context.Context, sp bridge.Spawn) (bridge.Link, error)

// Prestart starts dial's control link (a zero Spawn) now, in the
// background, and returns a Dial that hands it to the first caller that
// asks for a control link; every other call, and every control link
// after the first, dials as dial does.
//
// Why: an editor waits from spawning the bridge to its initialize
// answer. The engine dials its agent when the editor's initialize comes,
// after the bridge has opened its session store and started serving, and
// a child agent then starts up (an exec and its runtime's start, as long
// as the bridge's own) after all that. Started here, it starts up while
// the bridge does. That is what a hand-written relay does too: start the
// agent first.
//
// The engine gets the same link it would have dialled, at most sooner:
// an agent that failed to start or has exited by then is reported by the
// link as it would have been. stop closes the link if nothing took it
// (an editor that left before its initialize, or a bridge that failed to
// start serving) and waits for the dial to end; call it once serving is
// over.
func Prestart(ctx context.Context, dial Dial) (_ Dial, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	p := &prestarted{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.link, p.err = dial(ctx, bridge.Spawn{})
	}()
	// (On one P, the stdio relay's, the dial begins when the caller
	// first waits, about when serving starts. Yielding to it here started
	// the agent sooner but made the answer later, 150 spawns each: the
	// fork holds the only P until sysmon takes it back.)
	take := func(ctx context.Context, sp bridge.Spawn) (bridge.Link, error) {
		if !isControl(sp) || !p.take() {
			return dial(ctx, sp)
		}
		select {
		case <-p.done:
			return p.link, p.err
		case <-ctx.Done():
			go p.discard() // (no longer wanted: closed once it comes)
			return nil, ctx.Err()
		}
	}
	stop = func() {
		if p.take() {
			cancel()
			p.discard()
		}
		cancel()
	}
	return take, stop
}

// prestarted is the one early dial of Prestart.
type prestarted struct {
	done chan struct{} // closed once link and err are set
	link bridge.Link
	err  error

	mu    sync.Mutex
	taken bool
}

// take reports whether the caller is the first to take the link.
func (p *prestarted) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := !p.taken
	p.taken = true
	return first
}

// discard closes the link once the dial has ended.
func (p *prestarted) discard() {
	<-p.done
	if p.link != nil {
		p.link.Close()
	}
}

// isControl reports whether sp asks for a control link: the configured
// command as it is, in the bridge's own directory.
func isControl(sp bridge.Spawn) bool {
	c := sp.Command
	return sp.Cwd == "" && sp.Session == "" && c.Argv == nil && !c.Append && c.Env == nil && c.Cwd == ""
}
