package tests

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A token must not leak: an agent that refuses the WebSocket handshake and
// echoes the Authorization value in its 401 body used to put the token in
// the log at the default level and in the editor's error. Every configured
// secret is scrubbed from both.
func TestSecrets_EchoedTokenNeverLeaks(t *testing.T) {
	t.Parallel()
	const canary = "canary-7f3a9c21e0"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad credentials: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/acp"
	b := StartBridge(t, []string{"--url", url, "--header", "Authorization=ACP_TEST_TOKEN", "--log-level", "trace"},
		[]string{"ACP_TEST_TOKEN=Bearer " + canary}, nil)
	b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	l := b.Next(WaitTimeout)
	msg := l.Get("error.message").Str
	if !strings.Contains(msg, "401") || !strings.Contains(msg, "<redacted>") {
		t.Errorf("initialize answered %s, want the refusal with the token redacted", l)
	}
	b.In.Close()
	b.WaitExit(WaitTimeout)
	for _, line := range b.Out.Lines() {
		if strings.Contains(string(line.Raw), canary) {
			t.Errorf("the token reached the editor's stream: %s", line)
		}
	}
	if strings.Contains(b.Stderr(), canary) {
		t.Errorf("the token reached the log:\n%s", b.Stderr())
	}
}
