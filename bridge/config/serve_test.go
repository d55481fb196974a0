package config

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The serve block decodes every setting of acp-bridge serve, with paths
// relative to the file and the token from env() only.
func TestParse_Serve(t *testing.T) {
	t.Setenv("TEST_SERVE_TOKEN", "  sekrit-serve-token\n")
	src := `
serve {
  listen          = "0.0.0.0:9443"
  path            = "/edit"
  token           = env("TEST_SERVE_TOKEN")
  tls_cert        = "tls/cert.pem"
  tls_key         = "/etc/acp/key.pem"
  allow_origins   = ["https://editor.example", "http://localhost:3000"]
  max_connections = 500
  max_buffered    = "2MiB"
  idle_timeout    = "90s"
}
`
	cfg, diags := Parse([]byte(src), filepath.Join("conf", "c.hcl"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := &Serve{
		Listen: "0.0.0.0:9443", Path: "/edit", Token: "sekrit-serve-token",
		TLSCert: filepath.Join("conf", "tls", "cert.pem"), TLSKey: "/etc/acp/key.pem",
		AllowOrigins:   []string{"https://editor.example", "http://localhost:3000"},
		MaxConnections: 500, MaxBuffered: 2 << 20, IdleTimeout: 90 * time.Second,
	}
	if !reflect.DeepEqual(cfg.Serve, want) {
		t.Errorf("serve block =\n%s\nwant\n%s", showServe(cfg.Serve), showServe(want))
	}
	if s := fmt.Sprintf("%v %+v %#v", cfg.Serve.Token, *cfg.Serve, cfg.Serve.Token); strings.Contains(s, "sekrit") {
		t.Errorf("the token prints: %s", s)
	}

	for src, want := range map[string]*Serve{
		"log_level = \"info\"\n":                                     nil,
		"serve {}\n":                                                 {},
		"serve {\n  token_file = \"tok\"\n}\n":                       {TokenFile: filepath.Join("conf", "tok")},
		"serve {\n  idle_timeout = \"off\"\n}\n":                     {IdleTimeout: -1},
		"serve {\n  allow_origins = []\n}\n":                         {AllowOrigins: []string{}},
		"serve {\n  max_buffered = 65536\n}\n":                       {MaxBuffered: 65536},
		"serve {\n  token = \"x-${env(\"TEST_SERVE_TOKEN\")}\"\n}\n": {Token: "x-  sekrit-serve-token"},
	} {
		cfg, diags := Parse([]byte(src), filepath.Join("conf", "c.hcl"))
		if diags.HasErrors() {
			t.Errorf("%q: %v", src, diags)
			continue
		}
		if !reflect.DeepEqual(cfg.Serve, want) {
			t.Errorf("%q: serve block =\n%s\nwant\n%s", src, showServe(cfg.Serve), showServe(want))
		}
	}
}

// showServe prints s with its token's length in place of the token.
func showServe(s *Serve) string {
	if s == nil {
		return "nil"
	}
	c := *s
	c.Token = Secret(fmt.Sprintf("(%d bytes)", len(c.Token)))
	return fmt.Sprintf("%+v token %s", c, string(c.Token))
}

// Each mistake in a serve block is an error that says what to write, at
// the argument it is about; a token written in the file is refused
// without being echoed.
func TestParse_ServeBad(t *testing.T) {
	t.Setenv("TEST_SERVE_EMPTY", " ")
	for _, tt := range []struct{ src, summary, detail, at string }{
		{"serve {\n  listen = \"8443\"\n}\n", "Invalid listen address", "HOST:PORT", "2:12"},
		{"serve {\n  path = \"acp\"\n}\n", "Invalid path", "starts with /", "2:10"},
		{"serve {\n  token = \"hunter2-literal\"\n}\n", "Token written in the file", "env(\"VAR\")", "2:11"},
		{"serve {\n  token = env(\"TEST_SERVE_EMPTY\")\n}\n", "Empty token", "export VAR", "2:11"},
		{"serve {\n  token = env(\"TEST_SERVE_UNSET\", \"x\")\n  token_file = \"t\"\n}\n", "Conflicting token settings", "not both", "3:16"},
		{"serve {\n  tls_cert = \"c.pem\"\n}\n", "Incomplete TLS settings", "together", "2:3"},
		{"serve {\n  tls_key = \"k.pem\"\n}\n", "Incomplete TLS settings", "together", "2:3"},
		{"serve {\n  max_connections = 0\n}\n", "Invalid max_connections", "at least 1", "2:21"},
		{"serve {\n  max_connections = 1.5\n}\n", "Invalid max_connections", "whole number", "2:21"},
		{"serve {\n  max_buffered = \"lots\"\n}\n", "Invalid size", "64MiB", "2:18"},
		{"serve {\n  idle_timeout = \"soon\"\n}\n", "Invalid duration", "30s", "2:18"},
		{"serve {\n  allow_origins = \"https://a.example\"\n}\n", "Incorrect attribute value type", "list of string", "2:19"},
		{"serve {\n  listen = \"127.0.0.1:1\"\n  port = 1\n}\n", "Unsupported argument", "port", "3:3"},
		{"serve {}\nserve {}\n", "Duplicate serve block", "", "2:1"},
	} {
		_, diags := Parse([]byte(tt.src), "s.hcl")
		if !diags.HasErrors() {
			t.Errorf("%q: no error, want %q", tt.src, tt.summary)
			continue
		}
		d := diags[0]
		at := ""
		if d.Subject != nil {
			at = fmt.Sprintf("%d:%d", d.Subject.Start.Line, d.Subject.Start.Column)
		}
		if d.Summary != tt.summary || !strings.Contains(d.Detail, tt.detail) || at != tt.at {
			t.Errorf("%q: %s at %s (%s), want %q at %s with %q", tt.src, d.Summary, at, d.Detail, tt.summary, tt.at, tt.detail)
		}
		if strings.Contains(diags.Error(), "hunter2") {
			t.Errorf("%q: the diagnostics echo the token: %s", tt.src, diags.Error())
		}
	}
}
