//go:build unix

package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An editor's `acp-bridge -- COMMAND` gets its agent started as the
// bridge starts, before its packages have initialized (package early),
// and the bridge serves that process: one agent, started early. With a
// flag before the command, the bridge starts its agent itself, as it
// always did. Both serve the editor alike.
func TestEarly_AgentOfTheBareCommandStartsEarly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		early bool
	}{
		{"bare", nil, true},
		{"with a flag", []string{"--log-level", "info"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			agent := ChildTransport("acp").Start(t)
			b := StartBridge(t, append(tc.flags, agent.Args...), agent.Env, nil)
			b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
			if l := b.Next(10 * time.Second); !l.Get("result").Exists() {
				t.Fatalf("initialize: %s", l)
			}
			b.WriteLine(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
			if l := b.Next(10 * time.Second); !l.Get("result").Exists() {
				t.Fatalf("session/new: %s", l)
			}
			var starts []string
			for _, line := range strings.Split(b.Stderr(), "\n") {
				if strings.Contains(line, "agent process started:") {
					starts = append(starts, line)
				}
			}
			if len(starts) != 1 {
				t.Fatalf("%d agent processes started, want 1:\n%s", len(starts), tail(b.Stderr(), 4<<10))
			}
			if early := strings.Contains(starts[0], "early=true"); early != tc.early {
				t.Errorf("agent started early: %v, want %v: %s", early, tc.early, starts[0])
			}
		})
	}
}

// A bridge that stops before it serves (here, a configuration file it
// cannot read) leaves no early agent behind: it is stopped and reaped.
func TestEarly_BridgeThatCannotServeStopsItsAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	if err := os.MkdirAll(filepath.Join(cfg, "acp-bridge"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "acp-bridge", "config.hcl"), []byte("this is { not hcl\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "agent.pid")
	script := "echo $$ > " + pidFile + "; exec sleep 60"
	b := StartBridge(t, []string{"--", "/bin/sh", "-c", script}, []string{"XDG_CONFIG_HOME=" + cfg}, nil)
	code, ok := b.WaitExit(10 * time.Second)
	if !ok || code == 0 {
		t.Fatalf("the bridge served with an unreadable configuration (exited: %v, status %d):\n%s", ok, code, b.Stderr())
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the agent did not start early (no pid file: %v); the bridge's stderr:\n%s", err, b.Stderr())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	// Reaped by the bridge: no process, not even a zombie, has the pid
	// (barring a reuse in between, which would not be a child of ours).
	if err := syscall.Kill(pid, 0); err == nil {
		stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		t.Errorf("the early agent (pid %d) outlived the bridge: %s", pid, stat)
		killPID(pid)
	}
}

// An agent that exits at once, here before the bridge has even begun to
// wait for it (started early, it exits while the bridge initializes),
// still gets the editor's initialize an answer: an error that says how
// it ended, as one the bridge started itself does. (The race of such an
// exit with the poller is TestAwaitExit_AlreadyExited's, in nbio.)
func TestEarly_AgentThatExitsAtOnceIsReported(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"bare", nil},
		{"with a flag", []string{"--log-level", "info"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := StartBridge(t, append(tc.flags, "--", "/bin/sh", "-c", "exit 7"), nil, nil)
			b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
			l := b.Next(10 * time.Second)
			if msg := l.Get("error.message").String(); !strings.Contains(msg, "exited with status 7") {
				t.Fatalf("initialize of an agent that exited with status 7: %s", l)
			}
		})
	}
}
