package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	"github.com/tidwall/gjson"
)

func init() {
	ChildAgents["slow-init"] = func() int { return runLateAgent(400 * time.Millisecond) }
	ChildAgents["mute"] = func() int { return runLateAgent(-1) }
}

// runLateAgent answers initialize after delay (never when delay < 0) and
// exits at its stdin's end, as an agent that takes a moment to start does.
func runLateAgent(delay time.Duration) int {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		id := gjson.GetBytes(sc.Bytes(), "id")
		if gjson.GetBytes(sc.Bytes(), "method").Str != "initialize" || delay < 0 {
			continue
		}
		time.Sleep(delay)
		fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id.Raw, fakeagent.InitializeResult([]byte("1"), "stdio"))
	}
	return 0
}

// runPiped runs the bridge with stdin and stdout from the caller, waits at
// most limit for it to exit and returns its status, stderr and how long it
// took.
func runPiped(t *testing.T, args, env []string, stdin *os.File, stdout *os.File, limit time.Duration) (int, string, time.Duration) {
	t.Helper()
	cmd := exec.Command(BridgeBin, args...)
	cmd.Env = hermeticEnv(t, env)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, &stderr
	ownGroup(cmd)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		killGroup(cmd)
		<-done
		t.Fatalf("bridge still running %v after its input ended; stderr:\n%s", limit, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String(), time.Since(start)
}

// `echo '{…initialize…}' | acp-bridge -- agent` gets the agent's answer,
// as the agent alone would give it, not "acp-bridge is shutting down": at
// the end of its input the bridge finishes the requests in flight. An agent
// that never answers still has the bridge end within about 3 s, the request
// answered with an error.
func TestEndOfInput_FinishesRequestsInFlight(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}` + "\n"
	for _, tc := range []struct {
		agent   string
		wantErr bool
	}{{"slow-init", false}, {"mute", true}} {
		t.Run(tc.agent, func(t *testing.T) {
			t.Parallel()
			in, err := os.CreateTemp(t.TempDir(), "in")
			if err != nil {
				t.Fatal(err)
			}
			in.WriteString(initialize)
			in.Seek(0, 0)
			out, err := os.CreateTemp(t.TempDir(), "out")
			if err != nil {
				t.Fatal(err)
			}
			code, stderr, took := runPiped(t, []string{"--", exe}, []string{"FAKE_AGENT=" + tc.agent}, in, out, 6*time.Second)
			got, _ := os.ReadFile(out.Name())
			answer := gjson.ParseBytes(bytes.TrimSpace(got))
			t.Logf("stdout %s; exit %d after %v", got, code, took)
			if code != 0 {
				t.Errorf("exit status %d, want 0; stderr:\n%s", code, stderr)
			}
			if answer.Get("id").Raw != "0" {
				t.Fatalf("stdout = %q, want one answer to initialize", got)
			}
			if tc.wantErr {
				if !strings.Contains(answer.Get("error.message").Str, "shutting down") {
					t.Errorf("initialize answered %s, want the shutdown error", got)
				}
				if took > 3500*time.Millisecond {
					t.Errorf("the bridge took %v to end after its input, want about 3 s at most", took)
				}
			} else if answer.Get("result.protocolVersion").Int() != 1 {
				t.Errorf("initialize answered %s, want the agent's result", got)
			}
		})
	}
}

// An editor that closes its input and no longer reads the bridge's output
// has gone: the bridge ends with status 0, as stdin's end promises, not 1.
func TestEndOfInput_EditorNotReading(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.CreateTemp(t.TempDir(), "in")
	if err != nil {
		t.Fatal(err)
	}
	// Enough answers to fill the pipe nobody reads many times over.
	in.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}` + "\n")
	big := strings.Repeat("x", 32<<10)
	for i := 1; i <= 64; i++ {
		fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":"_test/echo","params":{"pad":%q}}`+"\n", i, big)
	}
	in.Seek(0, 0)
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close() // open and never read
	code, stderr, took := runPiped(t, []string{"--", exe}, []string{"FAKE_AGENT=acp"}, in, outW, 8*time.Second)
	outW.Close()
	if code != 0 {
		t.Errorf("exit status %d after %v, want 0; stderr:\n%s", code, took, stderr)
	}
	if took > 4*time.Second {
		t.Errorf("the bridge took %v to end after its input, want about 3 s at most", took)
	}
}
