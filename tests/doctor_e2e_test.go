package tests

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	fakerules "github.com/acp-bridge/acp-bridge/tests/fakeagent/rules"
	"github.com/tidwall/gjson"
)

// doctorJobqProfile is a profile file for fakerules.JobqAuth: it greets
// with the token from JOBQ_TOKEN, and its frames name their job. The test
// misspells one of its matches at a time (a typo a person makes).
const doctorJobqProfile = `summary = "jobq behind a token (doctor's tests)"

connect {
  send           = { op = "hello", token = env("JOBQ_TOKEN") }
  expect         = { op = "welcome" }
  reject         = { op = "denied" }
  reject_message = "jobq refused the connection: ${frame.msg}"
}

turn {
  key     = "job"
  give_up = "1500ms"
}

request "session/prompt" {
  send = { op = "run", job = id, text = prompt.text }
}

cancel {
  send = { op = "abort", job = turn.sent.job }
}

error {
  match   = { op = "fail" }
  message = "jobq ${frame.code}: ${frame.msg}"
}

event "ping" {
  match     = { op = "ping" }
  send      = { op = "pong" }
  keepalive = true
}

event "progress" {
  match   = { op = "progress" }
  message = frame.text
}

event "done" {
  match    = { op = "done" }
  end_turn = "end_turn"
}
`

// doctorRow is one case of doctor's verdict table: the verdict line, the
// evidence it names and the advice it gives, each a substring of stdout.
type doctorRow struct {
	name    string
	args    []string
	env     []string
	code    int      // exit status
	verdict string   // the line that says how it went
	proof   []string // the frame or status that proves it
	fix     []string // the advice that fits it
	absent  []string // what must not be said
}

// runDoctor runs the built binary's doctor as a person would, and returns
// its stdout, stderr and exit status.
func runDoctor(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(BridgeBin, append([]string{"doctor"}, args...)...)
	cmd.Env = hermeticEnv(t, env)
	cmd.Stdin = strings.NewReader("")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("doctor did not run: %v", err)
	}
	return out.String(), errb.String(), code
}

// doctor's verdicts (issue 54): "all good" only when a prompt produced
// content an editor would show and no agent frame went unmatched; every
// failure names the frame or status that proves it and the fix that fits
// it, with no "ok" line for the thing that failed. One row per cause,
// through the built binary against fake agents.
func TestDoctorVerdicts(t *testing.T) {
	t.Parallel()
	jobq := StartWSAgent(t, fakeagent.WSOptions{Serve: fakerules.JobqAuth("s3cret-token")})
	acpAgent := StartWSAgent(t, fakeagent.WSOptions{Serve: answersInvalidRequests})
	wantsToken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "missing bearer token", http.StatusUnauthorized)
	}))
	t.Cleanup(wantsToken.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/acp"
	ln.Close()

	dir := t.TempDir()
	profile := func(name, from, to string) string {
		src := strings.Replace(doctorJobqProfile, from, to, 1)
		if src == doctorJobqProfile && from != "" {
			t.Fatalf("the profile has no %q", from)
		}
		p := filepath.Join(dir, name+".hcl")
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := profile("jobq", "", "")
	token := []string{"JOBQ_TOKEN=s3cret-token"}

	rows := []doctorRow{
		{
			name: "typo in the end rule's match",
			args: []string{"--profile", profile("typo", `match    = { op = "done" }`, `match    = { op = "dnoe" }`), "--url", jobq.URL, "--prompt", "hello"},
			env:  token, code: 1,
			verdict: "FAILED   session/prompt",
			proof:   []string{`{"op":"done","job":`},
			fix:     []string{"edit the profile's match", `event "done"`, `"dnoe"`},
			absent:  []string{"all good", "pick the dialect"},
		},
		{
			name: "typo in the connect frame's match",
			args: []string{"--profile", profile("typo-connect", `expect         = { op = "welcome" }`, `expect         = { op = "welcom" }`), "--url", jobq.URL, "--prompt", "hello", "--request-timeout", "2s"},
			env:  token, code: 1,
			verdict: "FAILED   initialize",
			proof:   []string{`got {"op":"welcome"}`},
			fix:     []string{"edit the profile's match", `connect's expect`, `"welcom"`},
			absent:  []string{"all good", "pick the dialect", "ok       initialize"},
		},
		{
			name: "typo in a message rule's match key",
			args: []string{"--profile", profile("typo-key", `match   = { op = "progress" }`, `match   = { opp = "progress" }`), "--url", jobq.URL, "--prompt", "hello"},
			env:  token, code: 1,
			verdict: "FAILED   session/prompt: the turn ended (end_turn)",
			proof:   []string{`{"op":"progress","job":`},
			fix:     []string{"edit the profile's match", `event "progress"`, `"opp"`},
			absent:  []string{"all good", "pick the dialect", "ok       session/prompt"},
		},
		{
			name: "wrong token",
			args: []string{"--profile", good, "--url", jobq.URL, "--prompt", "hello"},
			env:  []string{"JOBQ_TOKEN=not-the-token-42"}, code: 1,
			verdict: "FAILED   initialize",
			proof:   []string{`{"op":"denied","msg":"invalid token"}`},
			fix:     []string{"the agent refused the credentials: check the token", "JOBQ_TOKEN"},
			absent:  []string{"all good", "pick the dialect", "not-the-token-42"},
		},
		{
			name: "HTTP 401",
			args: []string{"--url", wantsToken.URL + "/acp", "--prompt", "hello"},
			code: 1, verdict: "FAILED   initialize",
			proof:  []string{"HTTP 401 Unauthorized", "missing bearer token"},
			fix:    []string{"the server wants a token", "--header"},
			absent: []string{"all good", "pick the dialect", "ok       Streamable HTTP endpoint"},
		},
		{
			name: "refused port",
			args: []string{"--url", refused, "--prompt", "hello"},
			code: 1, verdict: "FAILED",
			proof:  []string{"connection refused"},
			fix:    []string{"nothing listens at " + refused + ": start the agent or fix the URL"},
			absent: []string{"all good", "pick the dialect", "ok "},
		},
		{
			name: "wrong dialect",
			args: []string{"--url", acpAgent.URL, "--dialect", "chat-lines", "--request-timeout", "3s"},
			code: 1, verdict: "FAILED   session/prompt",
			proof:  []string{`"jsonrpc":"2.0"`},
			fix:    []string{"--dialect acp"},
			absent: []string{"all good"},
		},
		{
			name: "good agent",
			args: []string{"--profile", good, "--url", jobq.URL, "--prompt", "hello"},
			env:  token, code: 0,
			verdict: "all good: an editor can use this agent through acp-bridge",
			proof:   []string{"ok       session/prompt: end of turn (end_turn)", "1 update(s)"},
			absent:  []string{"FAILED", "warning", "s3cret-token"},
		},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			stdout, stderr, code := runDoctor(t, r.env, r.args...)
			t.Logf("doctor took %v and said:\n%s", time.Since(start).Round(time.Millisecond), stdout)
			if code != r.code {
				t.Errorf("exit status %d, want %d\nstderr:\n%s", code, r.code, stderr)
			}
			if !strings.Contains(stdout, r.verdict) {
				t.Errorf("no verdict %q", r.verdict)
			}
			for _, w := range r.proof {
				if !strings.Contains(stdout, w) {
					t.Errorf("the report does not name the evidence %q", w)
				}
			}
			for _, w := range r.fix {
				if !strings.Contains(stdout, w) {
					t.Errorf("the advice lacks %q", w)
				}
			}
			for _, w := range r.absent {
				if strings.Contains(stdout, w) {
					t.Errorf("the report says %q", w)
				}
			}
		})
	}
}

// answersInvalidRequests is the fake ACP agent, which also answers a frame
// that is not JSON-RPC with an Invalid Request error of id null, as JSON-RPC
// 2.0 (§5) has a server do: the agent error frame a profile of another
// protocol has no rule for.
func answersInvalidRequests(in io.Reader, out io.Writer, opt fakeagent.Options) error {
	toSDK, sdkIn := io.Pipe()
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if gjson.GetBytes(line, "jsonrpc").Str != "2.0" {
				_, _ = out.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}` + "\n"))
				continue
			}
			if _, err := sdkIn.Write(append(line, '\n')); err != nil {
				return
			}
		}
		sdkIn.Close()
	}()
	return fakeagent.Serve(toSDK, out, opt)
}
