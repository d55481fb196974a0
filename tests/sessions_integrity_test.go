package tests

// Durable sessions under the conditions users meet (issue 25): large
// transcripts loaded promptly and within bounded memory, histories kept
// apart per agent, test tools that leave the user's history alone.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/clock"
	"github.com/coder/acp-go-sdk"
	"github.com/tidwall/gjson"
)

// writeTranscript writes a session's transcript and listing data the way
// the store does: n turns, each a prompt and one agent_message_chunk of
// chunk bytes.
func writeTranscript(t *testing.T, dir, sid, cwd, agent string, n, chunk int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, sid+".ndjson"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	text := strings.Repeat("x", chunk)
	// Dated an hour ago on the bridge's calendar: retention compares these
	// dates with the present, so a fixed date would expire with time.
	created := clock.Now().Add(-time.Hour).UTC()
	at, done := created.Format(time.RFC3339), created.Add(time.Second).Format(time.RFC3339)
	for i := range n {
		fmt.Fprintf(w, `{"t":"prompt","at":%q,"body":{"sessionId":%q,"prompt":[{"type":"text","text":"question %d"}]}}`+"\n", at, sid, i)
		fmt.Fprintf(w, `{"t":"u","u":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"answer %d %s"}}}`+"\n", i, text)
		fmt.Fprintf(w, `{"t":"stop","at":%q,"body":{"stopReason":"end_turn"}}`+"\n", done)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	meta, _ := json.Marshal(map[string]any{"sessionId": sid, "cwd": cwd, "title": "question 0", "agent": agent,
		"createdAt": at, "updatedAt": done})
	if err := os.WriteFile(filepath.Join(dir, sid+".json"), meta, 0o600); err != nil {
		t.Fatal(err)
	}
}

// vmHWM is a process's peak resident set, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// Loading a transcript near the 64 MiB cap streams it: the first replayed
// update reaches the editor within 100 ms of the load, and the bridge's
// peak RSS stays far below the file's size (the old load read the whole
// file and built every record and update in memory: ~450 MB and 10 s).
// The editor side is read raw, without the harness's schema check of
// every line: 60 MiB of it would dominate the test's time.
func TestSessions_LoadOfALargeTranscriptStreamsInBoundedMemory(t *testing.T) {
	t.Parallel()
	turns, chunk := 1000, 60<<10 // ~60 MiB
	if raceEnabled {
		turns = 200 // the race detector slows parsing tenfold
	}
	dir, cwd := t.TempDir(), t.TempDir()
	exe, _ := os.Executable()
	// The child agent's command is the test binary: the bridge names
	// the agent after it.
	writeTranscript(t, dir, "big", cwd, filepath.Base(exe), turns, chunk)

	cmd := exec.Command(BridgeBin, "--state-dir", dir, "--", exe)
	cmd.Env = hermeticEnv(t, []string{"FAKE_AGENT=acp"})
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("bridge: %v\n%s", err, tail(stderr.String(), 4096))
		}
	}()
	out := bufio.NewReaderSize(stdout, 1<<20)
	next := func() []byte {
		line, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the bridge: %v\n%s", err, tail(stderr.String(), 4096))
		}
		return line
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	if l := next(); gjson.GetBytes(l, "id").Raw != "1" {
		t.Fatalf("initialize answered %s", l)
	}
	idle := vmHWM(t, cmd.Process.Pid)
	sent := time.Now()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"big","cwd":`+strconv.Quote(cwd)+`,"mcpServers":[]}}`)
	var firstAfter time.Duration
	var prompts, answers int
	for {
		l := next()
		if gjson.GetBytes(l, "id").Raw == "2" {
			if !gjson.GetBytes(l, "result").IsObject() {
				t.Fatalf("load answered %s", truncate(string(l), 600))
			}
			break
		}
		if gjson.GetBytes(l, "method").Str != "session/update" {
			continue
		}
		if firstAfter == 0 {
			firstAfter = time.Since(sent)
			if got := gjson.GetBytes(l, "params.update.content.text").Str; got != "question 0" {
				t.Errorf("first replayed update is %q, want the first prompt", got)
			}
		}
		switch gjson.GetBytes(l, "params.update.sessionUpdate").Str {
		case "user_message_chunk":
			prompts++
		case "agent_message_chunk":
			answers++
		}
	}
	if prompts != turns || answers != turns {
		t.Errorf("replayed %d prompts and %d answers, want %d of each", prompts, answers, turns)
	}
	peak := vmHWM(t, cmd.Process.Pid)
	t.Logf("first update after %v; peak RSS %d MiB (idle %d MiB) for a %d MiB transcript", firstAfter, peak>>20, idle>>20, turns*chunk>>20)
	limit := 100 * time.Millisecond
	if raceEnabled {
		limit = 500 * time.Millisecond
	}
	if firstAfter > limit {
		t.Errorf("the first replayed update came %v after the load, want within %v", firstAfter, limit)
	}
	// A few records in flight and the editor queue's bound, not the file.
	if grew := peak - idle; grew > 48<<20 {
		t.Errorf("loading grew the bridge's RSS by %d MiB for a %d MiB transcript; want it bounded by a few records", grew>>20, turns*chunk>>20)
	}
}

// session/list shows the sessions of the agent being served, not those
// another agent recorded in the same state directory;
// --list-all-sessions shows them all.
func TestSessions_ListShowsTheServedAgentsSessions(t *testing.T) {
	t.Parallel()
	dir, cwd := t.TempDir(), t.TempDir()
	exe, _ := os.Executable()
	writeTranscript(t, dir, "mine", cwd, filepath.Base(exe), 1, 10)
	writeTranscript(t, dir, "theirs", cwd, "some-other-agent", 1, 10)
	for _, all := range []bool{false, true} {
		o := EditorOptions{Args: []string{"--state-dir", dir}}
		if all {
			o.Args = append(o.Args, "--list-all-sessions")
		}
		e := NewEditor(t, ChildTransport("acp"), o)
		e.Initialize(t)
		res, err := e.Conn.ListSessions(ctxT(t), acp.ListSessionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range res.Sessions {
			ids = append(ids, string(s.SessionId))
		}
		want := "mine"
		if all {
			want = "mine,theirs"
		}
		if strings.Join(ids, ",") != want && !(all && strings.Join(ids, ",") == "theirs,mine") {
			t.Errorf("list-all=%v listed %v, want %s", all, ids, want)
		}
	}
}

// check (and compare, which shares its agent launcher) runs an acp-bridge
// under test with its sessions in a scratch directory of its own: the
// scenarios' sessions (and the ids of sessions that do not exist they
// probe) never reach the user's history.
func TestCheck_LeavesTheUsersSessionHistoryAlone(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	exe := selfExe(t)
	rep, _, out := runCheck(t, []string{"FAKE_AGENT=acp", "XDG_STATE_HOME=" + state},
		"--long-prompt", "wait-cancel", "--", BridgeBin, "--", exe)
	if len(rep.Results) == 0 {
		t.Fatalf("check ran nothing:\n%s", out)
	}
	var left []string
	filepath.WalkDir(state, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, path)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("check left session files in the user's state directory: %v", left)
	}
}
