package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// replayTransport runs `acp-bridge replay TRACE --stdio` as the agent.
func replayTransport(path string) Transport {
	return Transport{Name: "replay", Start: func(t *testing.T) Agent {
		return Agent{Args: []string{"--", BridgeBin, "replay", path, "--stdio"}}
	}}
}

// replayScenario plays prompts in one session and returns the editor-side
// transcript, normalised.
func replayScenario(t *testing.T, tr Transport, args []string, prompts ...string) (*Editor, []string, []error) {
	t.Helper()
	e := NewEditor(t, tr, EditorOptions{Args: args})
	sid := e.Start(t)
	var errs []error
	for _, p := range prompts {
		_, err := e.Prompt(ctxT(t), sid, p)
		errs = append(errs, err)
	}
	stopBridge(t, e.Bridge)
	var out []string
	n := normaliser{ids: map[string]string{}}
	for _, l := range e.Out.Lines() {
		out = append(out, n.line(t, l.Raw))
	}
	return e, out, errs
}

// normaliser makes transcripts of two runs comparable: request ids and
// session ids become their order of appearance, and the bridge's name for
// its agent (the command it runs, which differs) is dropped.
type normaliser struct{ ids map[string]string }

func (n normaliser) name(kind, v string) string {
	k := kind + "|" + v
	if s, ok := n.ids[k]; ok {
		return s
	}
	s := fmt.Sprintf("%s-%d", kind, len(n.ids))
	n.ids[k] = s
	return s
}

func (n normaliser) line(t *testing.T, raw []byte) string {
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("editor line %s: %v", raw, err)
	}
	if id, ok := v["id"]; ok {
		b, _ := json.Marshal(id)
		v["id"] = n.name("id", string(b))
	}
	if res, ok := v["result"].(map[string]any); ok {
		if meta, ok := res["_meta"].(map[string]any); ok {
			if ab, ok := meta["acp-bridge"].(map[string]any); ok {
				delete(ab, "agent")
			}
		}
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, val := range x {
				if s, ok := val.(string); ok && k == "sessionId" {
					x[k] = n.name("session", s)
				} else {
					walk(val)
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	b, _ := json.Marshal(v)
	return string(b)
}

// A session recorded through the bridge in front of the fake ACP agent
// replays against `acp-bridge replay` as the agent: the editor sees the same
// transcript, agent-initiated permission request and its answer included.
// A different prompt is a mismatch: reported on stderr with the expected
// frame, answered with an error, and the replay exits with status 1.
func TestReplay_RoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agent.trace")
	prompts := []string{"hello", "stream 5", "permission"}
	_, recorded, errs := replayScenario(t, ChildTransport("acp"), []string{"--trace", path}, prompts...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("recording, prompt %q: %v", prompts[i], err)
		}
	}
	if !slices.ContainsFunc(recorded, func(s string) bool { return strings.Contains(s, "session/request_permission") }) {
		t.Fatalf("the recording has no permission request:\n%s", strings.Join(recorded, "\n"))
	}

	t.Run("same", func(t *testing.T) {
		t.Parallel()
		e, replayed, errs := replayScenario(t, replayTransport(path), nil, prompts...)
		for i, err := range errs {
			if err != nil {
				t.Errorf("replay, prompt %q: %v", prompts[i], err)
			}
		}
		if !slices.Equal(recorded, replayed) {
			t.Errorf("transcripts differ:\nrecorded\n%s\nreplayed\n%s", strings.Join(recorded, "\n"), strings.Join(replayed, "\n"))
		}
		if strings.Contains(e.Stderr(), "differs from the recording") || strings.Contains(e.Stderr(), "exited with status 1") {
			t.Errorf("replay reported a mismatch:\n%s", e.Stderr())
		}
	})

	t.Run("different-prompt", func(t *testing.T) {
		t.Parallel()
		e, _, errs := replayScenario(t, replayTransport(path), nil, "hello", "stream 6")
		if errs[0] != nil {
			t.Errorf("the matching first prompt failed: %v", errs[0])
		}
		if errs[1] == nil {
			t.Errorf("a prompt the recording does not have succeeded")
		}
		log := e.Stderr()
		if !strings.Contains(log, "differs from the recording") || !strings.Contains(log, `stream 5`) || !strings.Contains(log, `stream 6`) {
			t.Errorf("the mismatch is not reported with the expected and actual frames:\n%s", tail(log, 6000))
		}
		if !strings.Contains(log, "exited with status 1") {
			t.Errorf("the replay did not exit with status 1 after a mismatch:\n%s", tail(log, 6000))
		}
		var answer Line
		for _, l := range e.Out.Lines() {
			if l.IsResponse() && l.ID() == e.In.LastID("session/prompt") {
				answer = l
			}
		}
		if !strings.Contains(answer.Get("error.message").Str, "recording") {
			t.Errorf("the mismatched prompt was answered %s, want the replay's error", answer)
		}
	})
}

// The round trip with a legacy agent: the Gemini-style acp-v0 fake.
func TestReplay_RoundTripLegacyV0(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v0.trace")
	v0 := Transport{Name: "v0", Start: func(t *testing.T) Agent {
		return Agent{Args: []string{"--", mustExecutable(t)}, Env: []string{"FAKE_AGENT=acp-v0", "GORACE=atexit_sleep_ms=0"}}
	}}
	prompts := []string{"hello", "stream 3"}
	_, recorded, errs := replayScenario(t, v0, []string{"--dialect", "acp-v0", "--trace", path}, prompts...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("recording, prompt %q: %v", prompts[i], err)
		}
	}
	e, replayed, errs := replayScenario(t, replayTransport(path), []string{"--dialect", "acp-v0"}, prompts...)
	for i, err := range errs {
		if err != nil {
			t.Errorf("replay, prompt %q: %v", prompts[i], err)
		}
	}
	if !slices.Equal(recorded, replayed) {
		t.Errorf("transcripts differ:\nrecorded\n%s\nreplayed\n%s", strings.Join(recorded, "\n"), strings.Join(replayed, "\n"))
	}
	if strings.Contains(e.Stderr(), "differs from the recording") {
		t.Errorf("replay reported a mismatch:\n%s", e.Stderr())
	}
}

func mustExecutable(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// replay --listen serves the recorded WebSocket agent on loopback.
func TestReplay_ListenWebSocket(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ws.trace")
	prompts := []string{"hello", "stream 4"}
	_, recorded, errs := replayScenario(t, WSTransport(nil), []string{"--trace", path}, prompts...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("recording, prompt %q: %v", prompts[i], err)
		}
	}
	url, _, _ := startReplayListen(t, path)
	ws := Transport{Name: "replay-ws", Start: func(t *testing.T) Agent { return Agent{Args: []string{"--url", url + "/acp"}} }}
	_, replayed, errs := replayScenario(t, ws, nil, prompts...)
	for i, err := range errs {
		if err != nil {
			t.Errorf("replay, prompt %q: %v", prompts[i], err)
		}
	}
	if !slices.Equal(recorded, replayed) {
		t.Errorf("transcripts differ:\nrecorded\n%s\nreplayed\n%s", strings.Join(recorded, "\n"), strings.Join(replayed, "\n"))
	}
}

// replay --as editor drives a live agent with the recorded bridge frames
// and reports where it now differs: nothing for the same agent, the exact
// step and field for an agent whose answer changed.
func TestReplay_AsEditor(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agent.trace")
	prompts := []string{"hello", "stream 3", "permission"}
	_, _, errs := replayScenario(t, ChildTransport("acp"), []string{"--trace", path}, prompts...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("recording, prompt %q: %v", prompts[i], err)
		}
	}
	run := func(trace string) (string, int) {
		cmd := exec.Command(BridgeBin, "replay", trace, "--as", "editor", "--ignore", "result._meta.fake-agent.pid", "--", mustExecutable(t))
		cmd.Env = append(os.Environ(), "FAKE_AGENT=acp", "GORACE=atexit_sleep_ms=0")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String() + errb.String(), code
	}
	if out, code := run(path); code != 0 || !strings.Contains(out, "matches the recording") {
		t.Errorf("same agent: exit %d\n%s", code, out)
	}

	// The recording as an older agent would have made it.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "old.trace")
	if err := os.WriteFile(old, bytes.ReplaceAll(data, []byte("echo:hello"), []byte("echo:HELLO")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := run(old)
	if code != 1 || !strings.Contains(out, "differs from the recording") ||
		!strings.Contains(out, `params.update.content.text: expected "echo:HELLO", got "echo:hello"`) {
		t.Errorf("changed agent: exit %d, want 1 and the field named\n%s", code, out)
	}
	if n := strings.Count(out, "differs from the recording:"); n != 1 {
		t.Errorf("%d steps reported, want only the changed one\n%s", n, out)
	}
}

// TestReplay_AsEditorCheckRecording replays, as the editor, a session that
// check recorded (--trace-dir) against the flawed agent: its temporary
// cwd is gone, and the replay gives the live agent a fresh one; and when
// the live agent streams one update more than the recording, the replay
// still waits for each answer before sending the next request and reports
// exactly that count, not a cascade of misaligned frames.
func TestReplay_AsEditorCheckRecording(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	dir := t.TempDir()
	if rep, code, out := runCheck(t, []string{"FAKE_AGENT=flawed"}, "--trace-dir", dir, "--only", "prompt-stream", "--", exe); code != 0 || rep.status("prompt-stream") != "PASS" {
		t.Fatalf("recording: exit %d\n%s", code, out)
	}
	rec := filepath.Join(dir, "prompt-stream.ndjson")
	run := func(trace string) (string, int) {
		cmd := exec.Command(BridgeBin, "replay", trace, "--as", "editor", "--timeout", "20s", "--", exe)
		cmd.Env = hermeticEnv(t, []string{"FAKE_AGENT=flawed"})
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := run(rec); code != 0 || !strings.Contains(out, "matches the recording") {
		t.Fatalf("the same agent, its recorded cwd gone: exit %d\n%s", code, out)
	}

	// The recording with one streamed chunk fewer than the agent sends.
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	dropped := false
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if !dropped && strings.Contains(l, `"text":", ","type":"text"`) {
			dropped = true
			continue
		}
		kept = append(kept, l)
	}
	if !dropped {
		t.Fatalf("no \", \" chunk in the recording:\n%s", data)
	}
	short := filepath.Join(t.TempDir(), "short.ndjson")
	if err := os.WriteFile(short, []byte(strings.Join(kept, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := run(short)
	if code != 1 || !strings.Contains(out, "the agent sent 3 update(s) and notification(s) where the recording has 2") {
		t.Fatalf("one update more: exit %d, want 1 and the count reported\n%s", code, out)
	}
	if n := strings.Count(out, "step "); n != 1 || !strings.Contains(out, `extra:   {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"flawed-1","update":{"content":{"text":", "`) || strings.Contains(out, "missing:") {
		t.Errorf("%d steps reported, want only the one with the extra update, naming it\n%s", n, out)
	}
}

// TestReplay_SpeedAndIgnore: --speed scales the recorded delays of the agent's
// replies (0: none), and --ignore leaves a per-run nonce out of matching,
// in agent mode. Every bound holds by construction on a machine of any
// speed: a lower bound is measured from before the request is written (the
// delay starts when replay reads it), and an upper bound is only ever a
// fraction of a delay that the option must not have played.
func TestReplay_SpeedAndIgnore(t *testing.T) {
	t.Parallel()
	recording := func(delay time.Duration) string {
		path := filepath.Join(t.TempDir(), "slow.ndjson")
		rec := fmt.Sprintf(`{"t_ns":0,"time":"2026-01-01T00:00:00Z","hop":"agent","dir":"out","kind":"request","method":"initialize","id":1,"msg":{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"_meta":{"nonce":"run-1"}}}}
{"t_ns":%d,"time":"2026-01-01T00:00:01.5Z","hop":"agent","dir":"in","kind":"response","id":1,"msg":{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}}
`, delay.Nanoseconds())
		if err := os.WriteFile(path, []byte(rec), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	answer := func(path string, args ...string) time.Duration {
		cmd := exec.Command(BridgeBin, append([]string{"replay", path, "--stdio", "--ignore", "params._meta.nonce"}, args...)...)
		cmd.Env = hermeticEnv(t, nil)
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A replay that plays a delay it should not is ended, not waited
		// for: the caller's bound then fails.
		kill := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
		defer kill.Stop()
		start := time.Now()
		io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"_meta":{"nonce":"run-2"}}}`+"\n")
		line, _ := bufio.NewReader(out).ReadString('\n')
		took := time.Since(start)
		in.Close()
		cmd.Wait()
		if !strings.Contains(line, `"result":{"protocolVersion":1}`) {
			t.Fatalf("replay %q answered %q after %v\n%s", args, line, took, errb.String())
		}
		return took
	}
	if took := answer(recording(1500 * time.Millisecond)); took < 1500*time.Millisecond {
		t.Errorf("as recorded: answered after %v, before the recorded 1.5 s", took)
	}
	// An hour's recorded delay: answered at all (within the minute the
	// process is given) proves it was not played.
	if took := answer(recording(time.Hour), "--speed", "0"); took >= time.Minute {
		t.Errorf("--speed 0: answered after %v, want at once", took)
	}
	// 20 s played 10 times as fast: not before 2 s, and well before 20 s.
	if took := answer(recording(20*time.Second), "--speed", "10"); took < 2*time.Second || took >= 20*time.Second {
		t.Errorf("--speed 10: answered after %v, want about 2 s", took)
	}
}
