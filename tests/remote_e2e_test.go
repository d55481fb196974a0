package tests

// End-to-end tests of `acp-bridge serve`: the TypeScript SDK's own remote
// transport clients drive the fake agent through the bridge over Streamable
// HTTP and over WebSocket.

import (
	"slices"
	"strings"
	"testing"
)

// checkSDKSession requires one session's whole run of client.mjs: the streamed
// chunks in order, the permission allowed, the cancelled turn.
func checkSDKSession(t *testing.T, transport string, s struct {
	SessionID string   `json:"sessionId"`
	Stops     []string `json:"stops"`
	Texts     []string `json:"texts"`
}) {
	t.Helper()
	if want := []string{"end_turn", "end_turn", "cancelled"}; !slices.Equal(s.Stops, want) {
		t.Errorf("%s session %s: stop reasons %v, want %v", transport, s.SessionID, s.Stops, want)
	}
	var stream []string
	for _, x := range s.Texts {
		if strings.HasPrefix(x, "chunk-") {
			stream = append(stream, x)
		}
	}
	if want := []string{"chunk-0000", "chunk-0001", "chunk-0002", "chunk-0003", "chunk-0004"}; !slices.Equal(stream, want) {
		t.Errorf("%s session %s: streamed chunks %v, want %v", transport, s.SessionID, stream, want)
	}
	if !slices.Contains(s.Texts, "permission:selected:allow-once") {
		t.Errorf("%s session %s: the agent did not see the permission allowed; texts %q", transport, s.SessionID, s.Texts)
	}
	if !slices.Contains(s.Texts, "cancel-seen") {
		t.Errorf("%s session %s: the agent did not see the cancel; texts %q", transport, s.SessionID, s.Texts)
	}
}

// TestServeSDKClients: the SDK's experimental/http-client and ws-client run
// a whole session (initialize, new, streamed prompt, permission, cancel)
// through acp-bridge serve in front of the fake agent, with every message
// they receive valid ACP. serve requires a bearer token, which the clients
// send as the SDK's options.headers.
func TestServeSDKClients(t *testing.T) {
	const token = "sdk-clients-token"
	agent := ChildTransport("acp").Start(t)
	srv := StartServe(t, append([]string{"--token-env", "ACP_SERVE_TOKEN"}, agent.Args...), append([]string{"ACP_SERVE_TOKEN=" + token}, agent.Env...))
	for _, tc := range []struct{ transport, url string }{
		{"http", srv.Endpoint},
		{"ws", srv.WSURL()},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			run := runSDKClient(t, tc.transport, tc.url, 1, "ACP_TOKEN="+token)
			if run.Agent == "" {
				t.Errorf("initialize answered no agentInfo.name")
			}
			if len(run.Sessions) != 1 {
				t.Fatalf("got %d sessions, want 1", len(run.Sessions))
			}
			checkSDKSession(t, tc.transport, run.Sessions[0])
		})
	}
	if !strings.Contains(srv.Stderr(), "connection opened") {
		t.Errorf("serve logged no opened connection")
	}

}
