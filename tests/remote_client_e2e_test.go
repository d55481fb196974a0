package tests

// acp-bridge as the client of the ACP remote transport: --url http://… and
// --url ws://… against the TypeScript SDK's own AcpServer serving an
// SDK-built agent, driven by the acp-go-sdk client on the bridge's stdio.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
)

// remoteSession runs a whole session through e: a streamed prompt, a
// permission allowed, and a cancelled turn.
func remoteSession(t *testing.T, e *Editor) {
	t.Helper()
	e.Initialize(t)
	sid := e.NewSession(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	res, err := e.Prompt(ctx, sid, "hello remote world")
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %v, %v", res, err)
	}
	if got := strings.Join(e.Fake.Chunks(sid), ""); got != "heard: hello remote world" {
		t.Errorf("streamed chunks %q, want %q", got, "heard: hello remote world")
	}

	e.Fake.OnPermission(func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: "allow-once"}}}, nil
	})
	if res, err := e.Prompt(ctx, sid, "permission"); err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("permission prompt: %v, %v", res, err)
	}
	if !slices.Contains(e.Fake.Chunks(sid), "permission:allow-once") {
		t.Errorf("the agent did not get the permission answer; chunks %q", e.Fake.Chunks(sid))
	}

	turn, stop := context.WithCancel(ctx)
	done := make(chan acp.PromptResponse, 1)
	go func() {
		res, _ := e.Prompt(turn, sid, "slow")
		done <- res
	}()
	deadline := time.Now().Add(sdkWait)
	for !slices.ContainsFunc(e.Fake.Chunks(sid), func(s string) bool { return strings.HasPrefix(s, "tick-") }) {
		if time.Now().After(deadline) {
			t.Fatal("no tick of the slow turn")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := e.Conn.Cancel(ctx, acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.StopReason != acp.StopReasonCancelled {
			t.Errorf("cancelled turn ended %q", res.StopReason)
		}
	case <-time.After(sdkWait):
		t.Fatal("the cancelled turn did not end")
	}
	stop()
}

// TestURLToSDKServer: acp-bridge --url http://… (Streamable HTTP) and --url
// ws://… (the transport's WebSocket) reach an agent served by the SDK's
// AcpServer, through a whole session.
func TestURLToSDKServer(t *testing.T) {
	endpoint := StartSDKServer(t)
	for _, url := range []string{endpoint, "ws" + strings.TrimPrefix(endpoint, "http")} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			tr := Transport{Name: "sdk-server", Start: func(t *testing.T) Agent { return Agent{Args: []string{"--url", url}} }}
			e := NewEditor(t, tr, EditorOptions{Args: []string{"--log-level", "debug", "--no-sessions"}})
			remoteSession(t, e)
			log := e.Stderr()
			if !regexp.MustCompile(`connection_id=[0-9a-f-]{16,}`).MatchString(log) {
				t.Errorf("the bridge logged no Acp-Connection-Id of the SDK server's connection")
			}
		})
	}
}

// TestBridgeToBridgeAcrossRestart: acp-bridge --url http://… (and ws://…)
// in front of acp-bridge serve -- fake agent, the bridge on both ends. The serving side
// is stopped (SIGTERM) and started again at the same address; the local
// bridge reconnects (a new connection: initialize, then the session
// re-attached) and the session goes on with its history, as a lost agent
// does on stdio.
func TestBridgeToBridgeAcrossRestart(t *testing.T) {
	for _, scheme := range []string{"http", "ws"} {
		t.Run(scheme, func(t *testing.T) {
			agent := ChildTransport("acp").Start(t)
			serveArgs := append([]string{"--state-dir", t.TempDir()}, agent.Args...)
			first := StartServe(t, serveArgs, agent.Env)
			url := scheme + strings.TrimPrefix(first.Endpoint, "http")
			e := NewEditor(t, urlTransport(url), EditorOptions{Args: []string{"--state-dir", t.TempDir(), "--log-level", "debug"}})
			e.Initialize(t)
			sid := e.NewSession(t, "")
			promptTurn(t, e, sid, 2)

			if code, ok := first.Stop(20 * time.Second); !ok || code != 0 {
				t.Fatalf("the serving bridge did not stop cleanly on SIGTERM: status %d", code)
			}
			deadline := time.Now().Add(sdkWait)
			for !strings.Contains(e.Stderr(), "agent link lost") {
				if time.Now().After(deadline) {
					t.Fatal("the local bridge did not notice the serving side going")
				}
				time.Sleep(20 * time.Millisecond)
			}
			second := StartServeAt(t, first.Addr(), serveArgs, agent.Env)
			promptTurn(t, e, sid, 3)
			if j := e.Journal(t); !journalHas(j, "session/prompt", "stream 2", "stream 3") {
				t.Errorf("the re-attached session did not bring its history to the new agent; frames %q", j.Frames)
			}
			if !strings.Contains(second.Stderr(), "connection opened") {
				t.Errorf("the restarted serve saw no connection")
			}
		})
	}
}

// writeServeCert writes a self-signed certificate for 127.0.0.1 and its key
// as PEM files, as docs/remote.md's openssl line does for a host name.
func writeServeCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "acp-bridge test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestRemoteTLSAndToken: docs/remote.md's setup, on loopback: serve with
// a bearer token and TLS; the local bridge with --url https://…, the token
// in a header read from the environment, the certificate trusted with
// --ca-file; over wss:// too. Neither side logs the token.
func TestRemoteTLSAndToken(t *testing.T) {
	const token = "tls-test-token-9b1e"
	cert, key := writeServeCert(t)
	agent := ChildTransport("acp").Start(t)
	srv := StartServe(t, append([]string{"--token-env", "ACP_TOKEN", "--tls-cert", cert, "--tls-key", key, "--no-sessions"}, agent.Args...),
		append([]string{"ACP_TOKEN=" + token}, agent.Env...))
	if !strings.HasPrefix(srv.Endpoint, "https://") {
		t.Fatalf("serve with TLS logged endpoint %s", srv.Endpoint)
	}
	for _, url := range []string{srv.Endpoint, "wss" + strings.TrimPrefix(srv.Endpoint, "https")} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			args := []string{"--no-sessions", "--url", url, "--header", "Authorization=ACP_AUTH", "--ca-file", cert}
			b := StartBridge(t, args, []string{"ACP_AUTH=Bearer " + token}, nil)
			b.WriteLine(initializeBody)
			if l := b.Out.Response(t, "1"); !l.Get("result").Exists() {
				t.Fatalf("initialize over %s: %s", url, l)
			}
			b.WriteLine(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
			l := b.Out.Response(t, "2")
			sid := l.Get("result.sessionId").Str
			if sid == "" {
				t.Fatalf("session/new over %s: %s", url, l)
			}
			b.WriteLine(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"stream 2"}]}}`)
			if l := b.Out.Response(t, "3"); l.Get("result.stopReason").Str != "end_turn" {
				t.Errorf("prompt over %s: %s", url, l)
			}
			if strings.Contains(b.Stderr(), token) {
				t.Errorf("the local bridge logged the token")
			}
		})
	}
	if strings.Contains(srv.Stderr(), token) {
		t.Errorf("serve logged the token")
	}
	// Without the token's header the same URL is refused, clearly.
	b := StartBridge(t, []string{"--no-sessions", "--url", srv.Endpoint, "--ca-file", cert}, nil, nil)
	b.WriteLine(initializeBody)
	if l := b.Out.Response(t, "1"); !l.Get("error").Exists() || !strings.Contains(l.String()+b.Stderr(), "401") {
		t.Errorf("initialize without the token: %s\n%s", l, b.Stderr())
	}
}
