package tests

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeConfigBlock: `acp-bridge serve --config F` takes its settings
// from F's serve block: where it listens, the path, the token (read with
// env(), and from token_file), TLS with files relative to F, the
// connection limit. An editor's bridge connects with the block's token,
// and nothing gets in without it; serve logs no token.
func TestServeConfigBlock(t *testing.T) {
	const token = "config-block-token-51c7"
	agent := ChildTransport("acp").Start(t)
	dir := t.TempDir()
	cert, key := writeServeCert(t)
	for _, f := range [][2]string{{cert, "cert.pem"}, {key, "key.pem"}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f[1]), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("token from env, TLS", func(t *testing.T) {
		conf := filepath.Join(dir, "serve.hcl")
		writeFile(t, conf, `serve {
  listen          = "127.0.0.1:0"
  path            = "/edit"
  token           = env("ACP_SERVE_TOKEN")
  tls_cert        = "cert.pem"
  tls_key         = "key.pem"
  max_connections = 3
}
`)
		srv := StartServeArgs(t, append([]string{"--config", conf, "--no-sessions"}, agent.Args...),
			append([]string{"ACP_SERVE_TOKEN=" + token}, agent.Env...))
		if !strings.HasPrefix(srv.Endpoint, "https://127.0.0.1:") || !strings.HasSuffix(srv.Endpoint, "/edit") {
			t.Fatalf("serve with the block logged endpoint %s, want https://127.0.0.1:PORT/edit", srv.Endpoint)
		}
		if !strings.Contains(srv.Stderr(), "max_connections=3") {
			t.Errorf("serve did not take max_connections from the block:\n%s", srv.Stderr())
		}
		b := StartBridge(t, []string{"--no-sessions", "--url", srv.Endpoint, "--header", "Authorization=ACP_AUTH", "--ca-file", cert},
			[]string{"ACP_AUTH=Bearer " + token}, nil)
		b.WriteLine(initializeBody)
		if l := b.Out.Response(t, "1"); !l.Get("result").Exists() {
			t.Fatalf("initialize with the block's token: %s", l)
		}
		b.WriteLine(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
		sid := b.Out.Response(t, "2").Get("result.sessionId").Str
		if sid == "" {
			t.Fatal("session/new with the block's token: no session")
		}
		b.WriteLine(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"stream 2"}]}}`)
		if l := b.Out.Response(t, "3"); l.Get("result.stopReason").Str != "end_turn" {
			t.Errorf("prompt with the block's token: %s", l)
		}
		nobody := StartBridge(t, []string{"--no-sessions", "--url", srv.Endpoint, "--ca-file", cert}, nil, nil)
		nobody.WriteLine(initializeBody)
		if l := nobody.Out.Response(t, "1"); !l.Get("error").Exists() || !strings.Contains(l.String()+nobody.Stderr(), "401") {
			t.Errorf("initialize without the token: %s\n%s", l, nobody.Stderr())
		}
		if strings.Contains(srv.Stderr(), token) {
			t.Errorf("serve logged the token")
		}
	})

	t.Run("token_file, a flag over the block", func(t *testing.T) {
		writeFile(t, filepath.Join(dir, "token"), token+"\n")
		conf := filepath.Join(dir, "file.hcl")
		writeFile(t, conf, `serve {
  listen     = "127.0.0.1:1"
  token_file = "token"
}
`)
		// --listen on the command line overrides the block's.
		srv := StartServeArgs(t, append([]string{"--config", conf, "--listen", "127.0.0.1:0", "--no-sessions"}, agent.Args...), agent.Env)
		if !strings.HasSuffix(srv.Endpoint, "/acp") || strings.Contains(srv.Endpoint, ":1/") {
			t.Fatalf("endpoint %s, want --listen's address and the default path", srv.Endpoint)
		}
		status, h, body := servePost(t, srv.Endpoint, http.Header{"Authorization": {"Bearer " + token}}, initializeBody)
		if status != http.StatusOK || h.Get("Acp-Connection-Id") == "" {
			t.Errorf("initialize with the token_file's token: %d %s", status, body)
		}
		if status, _, body := servePost(t, srv.Endpoint, nil, initializeBody); status != http.StatusUnauthorized {
			t.Errorf("initialize without a token: %d %s, want 401", status, body)
		}
		if strings.Contains(srv.Stderr(), token) {
			t.Errorf("serve logged the token")
		}
	})
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
