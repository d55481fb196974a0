//go:build linux

package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkStartup measures what an editor waits for and pays when it
// spawns the bridge for an ACP agent child (the fake agent, re-executed from
// this test binary as ChildTransport("acp") does):
//
//   - init-ms: from spawning the bridge to its answer to initialize, which
//     includes the bridge spawning the agent and the agent answering;
//   - agent-init-ms: the same for the fake agent spawned directly, without
//     the bridge: the agent's own share, measured in the same run;
//   - added-init-ms: their difference, the bridge's share (target ≤ 15);
//   - idle-rss-MB: the bridge process's resident set (VmRSS) once it has
//     answered initialize and sat idle briefly (target ≤ 15). A -race build
//     (go test -race) inflates it several times.
//
// The figures are medians of max(b.N, 7) spawns of each, interleaved so
// that load from elsewhere on the machine hits both alike:
//
//	go test -run XXX -bench Startup -benchtime=1x ./tests/
func BenchmarkStartup(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	env := []string{"FAKE_AGENT=acp"}
	n := max(b.N, 7)
	var agentInit, bridgeInit []time.Duration
	var rss []int64
	b.ResetTimer()
	for range n {
		d, _ := spawnInitialize(b, exe, nil, env, false)
		agentInit = append(agentInit, d)
		d, r := spawnInitialize(b, BridgeBin, []string{"--", exe}, env, true)
		bridgeInit = append(bridgeInit, d)
		rss = append(rss, r)
	}
	b.StopTimer()

	a, br := median(agentInit), median(bridgeInit)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(br.Nanoseconds()), "ns/op")
	b.ReportMetric(ms(br), "init-ms")
	b.ReportMetric(ms(a), "agent-init-ms")
	b.ReportMetric(ms(br-a), "added-init-ms")
	b.ReportMetric(float64(median(rss))/(1<<20), "idle-rss-MB")
	if raceEnabled {
		b.Log("the bridge was built with -race: idle-rss-MB is not the release figure")
	}
}

// idleWait is how long the bridge sits idle after initialize before its
// resident set is read: long enough for start-up work (the agent's stderr
// logger, the first ping timer) to settle.
const idleWait = 200 * time.Millisecond

// spawnInitialize starts path with args, the way an editor does (stdin and
// stdout pipes), and returns how long it took from spawn to the answer to
// initialize and, if rss, the process's resident set after idleWait. The
// request is in the pipe before the spawn, so the time is the process's,
// not this benchmark's scheduling.
func spawnInitialize(b *testing.B, path string, args, env []string, rss bool) (time.Duration, int64) {
	b.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer inW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer outR.Close()
	var stderr lockedBuffer
	cmd := exec.Command(path, args...)
	cmd.Env = hermeticEnv(b, env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &stderr
	ownGroup(cmd) // kill the agent too on failure
	if _, err := inW.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}` + "\n"); err != nil {
		b.Fatal(err)
	}

	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	inR.Close()
	outW.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fail := func(format string, args ...any) {
		b.Helper()
		killGroup(cmd)
		<-exited
		b.Fatalf("%s: %s\nstderr:\n%s", path, fmt.Sprintf(format, args...), tail(stderr.String(), 8<<10))
	}

	outR.SetReadDeadline(time.Now().Add(WaitTimeout))
	line, err := bufio.NewReader(outR).ReadSlice('\n')
	took := time.Since(start)
	if err != nil {
		fail("no answer to initialize: %v", err)
	}
	if !bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":0,"result":`)) {
		fail("initialize answered %.300s", line)
	}

	var resident int64
	if rss {
		time.Sleep(idleWait)
		if resident, err = vmRSS(cmd.Process.Pid); err != nil {
			fail("%v", err)
		}
	}
	inW.Close() // EOF: both the bridge and the bare agent exit
	select {
	case <-exited:
	case <-time.After(WaitTimeout):
		fail("still running %v after stdin closed", WaitTimeout)
	}
	return took, resident
}

// vmRSS reads a process's resident set size from /proc.
func vmRSS(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func median[T time.Duration | int64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
