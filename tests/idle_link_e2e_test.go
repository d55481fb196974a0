package tests

import (
	"strings"
	"testing"
	"time"
)

// linkIdle is longer than any wait a transport arms when its link opens:
// the WebSocket's handshake and write waits (10 s), the HTTP client's
// header wait, a child's start-up.
const linkIdle = 15 * time.Second

// TestIdleLink_UsedAfterFifteenSeconds: a link to the agent that has been
// idle longer than any deadline set at dial, handshake or an earlier write
// carries the next prompt as it carried the first, on every transport: a
// WebSocket agent, a child on stdio, and a bridge in front of `acp-bridge
// serve` over Streamable HTTP and over its WebSocket. An editor left alone
// for a while, or an agent slow to start, must never find the link dead.
func TestIdleLink_UsedAfterFifteenSeconds(t *testing.T) {
	t.Parallel()
	serveTransport := func(scheme string) Transport {
		return Transport{Name: "serve-" + scheme, Start: func(t *testing.T) Agent {
			agent := ChildTransport("acp").Start(t)
			srv := StartServe(t, append([]string{"--no-sessions"}, agent.Args...), agent.Env)
			return Agent{Args: []string{"--url", scheme + strings.TrimPrefix(srv.Endpoint, "http")}}
		}}
	}
	trs := []Transport{WSTransport(nil), ChildTransport("acp"), serveTransport("http"), serveTransport("ws")}
	RunTransports(t, trs, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		sid := e.Start(t)
		promptTurn(t, e, sid, 2)
		time.Sleep(linkIdle)
		promptTurn(t, e, sid, 3)
		if strings.Contains(e.Stderr(), "agent link lost") {
			t.Errorf("the link was lost while idle:\n%s", tail(e.Stderr(), 4<<10))
		}
	})
}
