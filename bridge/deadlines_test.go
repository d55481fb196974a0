package bridge_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/tidwall/gjson"
)

// Timed requests share one timer (deadlines.go). Whatever the order in
// which requests are sent and answered, each request gets exactly one
// answer: the agent's when it answered in time, else the timeout, and the
// timeout never before the request's deadline. Random interleavings of
// sends, answers in and out of order, and pauses around the deadline.
func TestRequestTimeout_RandomInterleavings(t *testing.T) {
	const timeout = 150 * time.Millisecond
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			h := newHarness(t, func(b *bridge.Bridge) { b.RequestTimeout = timeout })
			h.initialize()
			type req struct {
				sent     time.Time
				agentID  string
				answered bool // by the agent, in the test's eyes
			}
			reqs := map[string]*req{}
			var open []string // sent, not answered by the agent yet
			// Odd seeds: many requests, most answered at once, behind
			// the first, which never is: the queue compacts.
			many := seed%2 == 1
			n := 30 + rng.IntN(30)
			if many {
				n = 200 + rng.IntN(100)
			}
			for i := range n {
				id := fmt.Sprint(100 + i)
				h.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"_x/slow","params":{}}`)
				f := h.agentRecv()
				for gjson.Get(f, "method").Str != "_x/slow" {
					f = h.agentRecv() // (a timed-out request's cancellation)
				}
				reqs[id] = &req{sent: time.Now(), agentID: gjson.Get(f, "id").Raw}
				open = append(open, id)
				choice := rng.IntN(4)
				if many {
					choice = min(choice, 1) - 1 // answer (in time), never pause
					if i == 0 {
						choice = 3 // (the first is left)
					}
				}
				switch choice {
				case 0, -1: // answer a random open one, in time
					k := rng.IntN(len(open))
					if many {
						k = len(open) - 1 // (the newest: the first stays open)
					}
					r := reqs[open[k]]
					if time.Since(r.sent) < timeout/2 {
						h.agentSend(`{"jsonrpc":"2.0","id":` + r.agentID + `,"result":{"ok":true}}`)
						r.answered = true
						open = append(open[:k], open[k+1:]...)
					}
				case 1: // a pause that lets some deadlines pass
					time.Sleep(time.Duration(rng.IntN(int(timeout))))
				}
			}
			// Everything still open times out; answers already sent arrive.
			got := map[string]string{}
			deadline := time.After(10 * timeout * 10)
			for len(got) < n {
				line := make(chan string, 1)
				go func() { line <- h.recv() }()
				var l string
				select {
				case l = <-line:
				case <-deadline:
					t.Fatalf("%d of %d requests answered", len(got), n)
				}
				id := gjson.Get(l, "id").Raw
				r := reqs[id]
				if r == nil {
					t.Fatalf("answer to an unknown id: %s", l)
				}
				if prev, dup := got[id]; dup {
					t.Fatalf("request %s answered twice:\n%s\n%s", id, prev, l)
				}
				got[id] = l
				timedOut := strings.Contains(l, "did not answer")
				switch {
				case r.answered && timedOut:
					t.Errorf("request %s answered by the agent in time, but timed out: %s", id, l)
				case !r.answered && !timedOut:
					t.Errorf("request %s never answered by the agent, but got %s", id, l)
				case timedOut && time.Since(r.sent) < timeout:
					t.Errorf("request %s timed out after %v, before its %v", id, time.Since(r.sent), timeout)
				}
			}
		})
	}
}
