package cli

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/bridge/demo"
)

// doctor names each cause of failure in plain words and says what to do,
// against fakes: a port with nothing listening, a TLS server whose CA is
// unknown, a server refusing the handshake with 401, a missing executable,
// and an agent that speaks another dialect than the one configured. The
// same agent with its right dialect passes.
func TestDoctor(t *testing.T) {
	// The demo's built-in agent speaks Open Interpreter's LMC over a
	// WebSocket, not ACP: the "another dialect" for --dialect acp.
	agent := &demo.Agent{Dir: t.TempDir()}
	lmc := httptest.NewServer(agent)
	t.Cleanup(func() { lmc.Close(); agent.Close() })
	lmcURL := "ws" + strings.TrimPrefix(lmc.URL, "http") + "/"

	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(tlsSrv.Close)
	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "bad token", http.StatusUnauthorized)
	}))
	t.Cleanup(unauthorized.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().String()
	ln.Close()

	cfg := filepath.Join(t.TempDir(), "c.hcl")
	if err := os.WriteFile(cfg, []byte("agent \"gone\" {\n  command = [\"/nonexistent/agent\"]\n}\nagent \"lmc\" {\n  dialect = \"open-interpreter\"\n  websocket {\n    url = \""+lmcURL+"\"\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // substrings of stdout
	}{
		{"works", []string{"doctor", "--url", lmcURL, "--dialect", "open-interpreter", "--prompt", "hello"}, 0,
			[]string{"ok       WebSocket handshake", "ok       initialize", "ok       session/new", "ok       session/prompt: end of turn (end_turn)", "all good"}},
		{"unreachable", []string{"doctor", "--url", "ws://" + closedPort + "/"}, 1,
			[]string{"FAILED   agent unreachable at ws://" + closedPort + "/", "to fix:  nothing listens at ws://" + closedPort + "/: start the agent or fix the URL"}},
		{"tls unknown CA", []string{"doctor", "--url", "wss" + strings.TrimPrefix(tlsSrv.URL, "https") + "/"}, 1,
			[]string{"FAILED", "to fix:  TLS: the agent's certificate is signed by a CA this machine does not trust", "--ca-file"}},
		{"auth", []string{"doctor", "--url", "ws" + strings.TrimPrefix(unauthorized.URL, "http") + "/"}, 1,
			[]string{"FAILED   agent at", "HTTP 401 Unauthorized", "to fix:  the server wants a token (HTTP 401) and none was sent: give it with --header Authorization=ENVVAR"}},
		{"missing executable", []string{"doctor", "--", "/nonexistent/agent"}, 1,
			[]string{`FAILED   the agent's executable "/nonexistent/agent" was not found`, "to fix:  install it"}},
		{"wrong dialect", []string{"doctor", "--url", lmcURL, "--dialect", "acp"}, 1,
			[]string{"ok       WebSocket handshake", "FAILED   initialize", "to fix:  the agent does not seem to speak dialect acp"}},
		{"configured agent", []string{"doctor", "--config", cfg, "--agent", "lmc"}, 0,
			[]string{`agent "lmc" (dialect open-interpreter`, "ok       session/new", "no problem found in initialize and session/new; a prompt turn was not run"}},
		{"configured agent missing executable", []string{"--config", cfg, "doctor", "--agent", "gone"}, 1,
			[]string{`FAILED   the agent's executable "/nonexistent/agent" was not found`}},
		{"flags before doctor", []string{"--url", "ws://" + closedPort + "/", "doctor"}, 1,
			[]string{"FAILED   agent unreachable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runSelf(t, nil, tt.args...)
			t.Logf("doctor said:\n%s", stdout)
			if code != tt.wantCode {
				t.Errorf("exit status = %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}
