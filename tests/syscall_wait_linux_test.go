package tests

import (
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// goroutineHeader is the first line of one goroutine in a Go stack dump,
// and its state.
var goroutineHeader = regexp.MustCompile(`(?m)^goroutine \d+ .*\[([^\]]+)\]:$`)

// A goroutine in a blocking system call keeps its P until the runtime's
// monitor (sysmon) takes it back, a tick after it sees the call: up to
// 10 ms once sysmon has backed off, which it does whenever nothing ran for
// a millisecond. The stdio relay runs on one P, so while a goroutine sat
// in one nothing else of the relay ran: the wait for a child agent sat in
// waitid(2), and an editor's first answer came up to 10 ms late about one
// start in two. So no goroutine of a serving relay may wait in a system
// call, over either transport: waits belong in the poller (a child's exit
// in a pidfd's, nbio.AwaitExit). The one exception is os/signal's loop,
// whose wait gives its P up as it starts (runtime.notetsleepg).
//
// Checked on the built binary, sessions on, after a prompt turn: a stack
// dump (SIGQUIT) lists every goroutine and what it waits in.
func TestRelay_NoGoroutineWaitsInASystemCall(t *testing.T) {
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		agent := tr.Start(t)
		b := StartBridge(t, agent.Args, append(agent.Env, "GOTRACEBACK=all"), nil)
		for i, req := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`,
		} {
			b.WriteLine(req)
			if l := b.Next(10 * time.Second); !l.Get("result").Exists() {
				t.Fatalf("request %d: %s", i+1, l)
			}
		}
		sid := b.Out.Lines()[1].Get("result.sessionId").String()
		b.WriteLine(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"stream 50"}]}}`)
		for l := b.Next(10 * time.Second); !l.Get("id").Exists(); l = b.Next(10 * time.Second) {
		}
		// Idle, as between an editor's requests: every goroutine has
		// reached the wait it stays in.
		time.Sleep(300 * time.Millisecond)

		b.Signal(syscall.SIGQUIT)
		if _, ok := b.WaitExit(10 * time.Second); !ok {
			t.Fatal("the bridge did not exit on SIGQUIT")
		}
		dump := b.Stderr()
		heads := goroutineHeader.FindAllStringSubmatchIndex(dump, -1)
		if len(heads) < 5 {
			t.Fatalf("no goroutine dump on stderr after SIGQUIT (%d goroutines found)", len(heads))
		}
		for i, h := range heads {
			state := dump[h[2]:h[3]]
			if !strings.HasPrefix(state, "syscall") {
				continue
			}
			end := len(dump)
			if i+1 < len(heads) {
				end = heads[i+1][0]
			}
			stack := dump[h[0]:end]
			if first := strings.SplitN(stack, "\n", 3); len(first) > 1 && strings.HasPrefix(first[1], "runtime.notetsleepg(") {
				continue // os/signal's loop: its wait hands the P off
			}
			t.Errorf("a goroutine of the serving relay waits in a system call, holding the relay's one P until sysmon takes it back:\n%s", stack)
		}
	})
}
