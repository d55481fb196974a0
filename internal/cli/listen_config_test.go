package cli

import (
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
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/bridge/remote"
	"github.com/urfave/cli/v2"
)

// served is what remoteServer made of a command line and a serve block.
type served struct {
	Addr, Path, Token     string
	TLS                   [2]string
	Origins               []string
	MaxConns              int
	MaxMessage, MaxBuffer int64
	Idle                  time.Duration
}

// serveSettings runs the serve command's flags over args with the serve
// block of src (none when ""), and returns what remoteServer made of them.
func serveSettings(t *testing.T, src string, maxMessage int, args ...string) (served, error) {
	t.Helper()
	var sc *config.Serve
	if src != "" {
		cfg, diags := config.Parse([]byte(src), filepath.Join(t.TempDir(), "c.hcl"))
		if diags.HasErrors() {
			t.Fatalf("%s: %v", src, diags)
		}
		sc = cfg.Serve
	}
	cmd := remoteServeCommand()
	var got served
	var err error
	cmd.Action = func(c *cli.Context) error {
		var srv *remote.Server
		srv, got.Addr, got.TLS, err = remoteServer(c, sc, maxMessage)
		if err == nil {
			got.Path = servePath(c, sc)
			got.Token, got.Origins, got.MaxConns = srv.Token, srv.AllowOrigins, srv.MaxConnections
			got.MaxMessage, got.MaxBuffer, got.Idle = srv.MaxMessage, srv.MaxBuffered, srv.IdleTimeout
		}
		return nil
	}
	app := &cli.App{Name: "acp-bridge", Commands: []*cli.Command{cmd}}
	if rerr := app.Run(append([]string{"acp-bridge", "serve"}, args...)); rerr != nil {
		t.Fatal(rerr)
	}
	return got, err
}

// The serve block sets each of serve's settings; a flag given overrides
// the block's setting, and the block overrides the defaults. The token
// comes from one place: a token flag replaces the block's token.
func TestServeBlockAndFlags(t *testing.T) {
	t.Setenv("TEST_SERVE_BLOCK_TOKEN", "block-token")
	t.Setenv("TEST_SERVE_FLAG_TOKEN", "flag-token")
	for _, name := range []string{flagListen, flagPath, flagTokenEnv, flagTokenFile, flagTLSCert, flagTLSKey, flagAllowOrigin, flagMaxConnections, flagMaxBuffered, flagIdleTimeout} {
		for _, v := range envTwin(name) {
			os.Unsetenv(v)
		}
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("  file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key := writeTestCert(t, dir)
	block := `serve {
  listen          = "0.0.0.0:9443"
  path            = "/edit"
  token           = env("TEST_SERVE_BLOCK_TOKEN")
  tls_cert        = "` + cert + `"
  tls_key         = "` + key + `"
  allow_origins   = ["https://editor.example"]
  max_connections = 500
  max_buffered    = "2MiB"
  idle_timeout    = "off"
}`
	defaults := served{Addr: "127.0.0.1:8443", Path: "/acp", MaxConns: remote.DefaultMaxConnections}
	fromBlock := served{Addr: "0.0.0.0:9443", Path: "/edit", Token: "block-token", TLS: [2]string{cert, key},
		Origins: []string{"https://editor.example"}, MaxConns: 500, MaxBuffer: 2 << 20, Idle: -1}
	for _, tt := range []struct {
		name, src string
		args      []string
		want      served
	}{
		{"no block, no flags: the defaults", "", nil, defaults},
		{"an empty block: the defaults", "serve {}", nil, defaults},
		{"the block", block, nil, fromBlock},
		{"flags over the block", block, []string{"--listen", "127.0.0.1:0", "--path", "/x", "--token-env", "TEST_SERVE_FLAG_TOKEN",
			"--allow-origin", "https://a.example", "--allow-origin", "https://b.example", "--max-connections", "7", "--max-buffered", "1MiB", "--idle-timeout", "30s"},
			served{Addr: "127.0.0.1:0", Path: "/x", Token: "flag-token", TLS: [2]string{cert, key},
				Origins: []string{"https://a.example", "https://b.example"}, MaxConns: 7, MaxBuffer: 1 << 20, Idle: 30 * time.Second}},
		{"--token-file over the block's token", block, []string{"--token-file", tokenFile},
			func() served { s := fromBlock; s.Token = "file-token"; return s }()},
		{"the block's token_file", `serve {
  token_file = "` + tokenFile + `"
}`, nil, func() served { s := defaults; s.Token = "file-token"; return s }()},
		{"flags alone", "", []string{"--listen", "127.0.0.1:0", "--token-file", tokenFile, "--idle-timeout", "off"},
			func() served { s := defaults; s.Addr, s.Token, s.Idle = "127.0.0.1:0", "file-token", -1; return s }()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := serveSettings(t, tt.src, 0, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}

	// max_message, top-level, bounds the endpoint's messages as the
	// engine's (resolved with --max-message by ResolveSettings).
	if got, err := serveSettings(t, "", 1<<20); err != nil || got.MaxMessage != 1<<20 {
		t.Errorf("max_message 1MiB: the endpoint's bound is %d (%v)", got.MaxMessage, err)
	}

	for _, tt := range []struct {
		name, src string
		args      []string
		want      string
	}{
		{"beyond loopback without a token", `serve {
  listen = "0.0.0.0:9443"
}`, nil, "listens beyond loopback"},
		{"two token flags", "", []string{"--token-env", "TEST_SERVE_FLAG_TOKEN", "--token-file", tokenFile}, "not both"},
		{"an empty token file", `serve {
  token_file = "` + filepath.Join(dir, "empty") + `"
}`, nil, "the serve block's token_file"},
		{"a certificate flag without its key", block, []string{"--tls-cert", cert}, "together"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.WriteFile(filepath.Join(dir, "empty"), []byte("\n"), 0o600)
			_, err := serveSettings(t, tt.src, 0, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "block-token") {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
}

// config.example.hcl's serve block says the defaults: the settings it
// gives are serve's own defaults.
func TestServeBlockExampleIsTheDefaults(t *testing.T) {
	cfg, diags := config.Check("../../config.example.hcl") // its env() variables need not be set
	if cfg.Serve == nil {
		t.Fatalf("config.example.hcl has no serve block (%v)", diags)
	}
	want := &config.Serve{Listen: "127.0.0.1:8443", Path: "/acp", AllowOrigins: []string{},
		MaxConnections: remote.DefaultMaxConnections, MaxBuffered: remote.DefaultMaxBuffered, IdleTimeout: remote.DefaultIdleTimeout}
	if !reflect.DeepEqual(cfg.Serve, want) {
		t.Errorf("the example's serve block is %+v, want serve's defaults %+v", cfg.Serve, want)
	}
	flags := map[string]string{}
	for _, f := range remoteServeCommand().Flags {
		if sf, ok := f.(*cli.StringFlag); ok {
			flags[sf.Name] = sf.Value
		}
	}
	if flags[flagListen] != want.Listen || flags[flagPath] != want.Path {
		t.Errorf("the flags' defaults --listen %q --path %q differ from the example's", flags[flagListen], flags[flagPath])
	}
}

// writeTestCert writes a self-signed certificate for 127.0.0.1 and its key
// into dir, as PEM files.
func writeTestCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "acp-bridge test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
