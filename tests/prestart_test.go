package tests

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var agentStarted = regexp.MustCompile(`agent process started: .*pid=(\d+)`)

// awaitAgentStarted waits for the bridge to log that it started its child
// agent, before the editor has sent anything, and returns the agent's pid.
func awaitAgentStarted(t *testing.T, b *Bridge) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := agentStarted.FindStringSubmatch(b.Stderr()); m != nil {
			pid, _ := strconv.Atoi(m[1])
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no child agent started within 10 s of the bridge, with no initialize sent:\n%s", tail(b.Stderr(), 4<<10))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The bridge starts a child agent as it starts, so that the agent starts up
// while the bridge does rather than once the editor's initialize comes
// (launch.Prestart): an editor waits for both. The engine's first link is
// that agent, so one process serves the editor, initialize and all.
func TestPrestart_AgentStartsWithTheBridge(t *testing.T) {
	t.Parallel()
	agent := ChildTransport("acp").Start(t)
	b := StartBridge(t, agent.Args, agent.Env, nil)
	pid := awaitAgentStarted(t, b)
	b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	if l := b.Next(10 * time.Second); !l.Get("result").Exists() {
		t.Fatalf("initialize: %s", l)
	}
	b.WriteLine(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	if l := b.Next(10 * time.Second); !l.Get("result").Exists() {
		t.Fatalf("session/new: %s", l)
	}
	if n := len(agentStarted.FindAllString(b.Stderr(), -1)); n != 1 {
		t.Errorf("%d agent processes started, want the one started with the bridge (pid %d) to serve:\n%s", n, pid, tail(b.Stderr(), 4<<10))
	}
}

// An agent the editor never used (it left before its initialize) is
// stopped with the bridge, not left running.
func TestPrestart_UnusedAgentStopsWithTheBridge(t *testing.T) {
	t.Parallel()
	agent := ChildTransport("acp").Start(t)
	b := StartBridge(t, agent.Args, agent.Env, nil)
	pid := awaitAgentStarted(t, b)
	b.In.Close()
	if _, ok := b.WaitExit(10 * time.Second); !ok {
		t.Fatal("the bridge did not exit within 10 s of its stdin closing")
	}
	if !strings.Contains(b.Stderr(), "agent process ended: pid="+strconv.Itoa(pid)) {
		t.Errorf("the bridge exited without saying its agent (pid %d) ended:\n%s", pid, tail(b.Stderr(), 4<<10))
	}
	// (The agent is our child's child, reaped by the bridge: gone, not a zombie.)
	if pidAlive(pid) {
		t.Errorf("the unused agent (pid %d) is still there after the bridge exited", pid)
	}
}
