package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A URL is checked when the flags and the configuration are read, by one
// function, so that serve, doctor and config validate refuse the same URLs
// with the same precise message, and refuse them before dialling anything.
func TestAgentURLChecked(t *testing.T) {
	bad := []struct {
		url, want string
	}{
		{"ws://127.0.0.1:", `host "127.0.0.1:" has a colon but no port after it`},
		{"ws://127.0.0.1:99999/acp", "port 99999 of host \"127.0.0.1:99999\" is out of range: a port is 1 to 65535"},
		{"ws://[::1", `host "[::1" lacks its closing ']'`},
		{"ftp://127.0.0.1:8765/acp", `scheme "ftp" is not supported: use ws:// or wss:// for a WebSocket agent, http:// or https:// for an ACP remote (Streamable HTTP) endpoint`},
		{"http://127.0.0.1:", `host "127.0.0.1:" has a colon but no port after it`},
		{"127.0.0.1:8765", "it is not an absolute URL"},
		{"ws:///acp", "it has no host"},
	}
	for _, tt := range bad {
		for _, cmd := range [][]string{{"--url", tt.url}, {"doctor", "--url", tt.url}} {
			t.Run(strings.Join(cmd, " "), func(t *testing.T) {
				stdout, stderr, code := runSelf(t, nil, cmd...)
				if code != 2 || stdout != "" {
					t.Errorf("exit status %d, stdout %q; want 2 and nothing", code, stdout)
				}
				if !strings.Contains(stderr, "--url: "+tt.want) {
					t.Errorf("stderr lacks %q:\n%s", "--url: "+tt.want, stderr)
				}
			})
		}
		t.Run("config validate "+tt.url, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "c.hcl")
			src := "agent \"a\" {\n  websocket {\n    url = \"" + tt.url + "\"\n  }\n}\n"
			if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := runSelf(t, nil, "config", "validate", "--config", cfg)
			if code != 1 || stdout != "" {
				t.Errorf("exit status %d, stdout %q; want 1 and nothing", code, stdout)
			}
			if !strings.Contains(stderr, "Invalid WebSocket URL") || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "line 3") {
				t.Errorf("stderr lacks the diagnostic %q at line 3:\n%s", tt.want, stderr)
			}
		})
	}
	// A token in the URL is never repeated in the message.
	_, stderr, _ := runSelf(t, nil, "--url", "ftp://user:s3cret@h:1/p?token=s3cret")
	if strings.Contains(stderr, "s3cret") {
		t.Errorf("the message repeats the URL's secret:\n%s", stderr)
	}
}

// claude-stream-json builds its CLI's command line per session: it cannot
// be served at a URL, and says so rather than dialling.
func TestStreamJSONWithURL(t *testing.T) {
	stdout, stderr, code := runSelf(t, nil, "--dialect", "claude-stream-json", "--url", "ws://127.0.0.1:1/")
	if code != 2 || stdout != "" {
		t.Errorf("exit status %d, stdout %q; want 2 and nothing", code, stdout)
	}
	if want := "dialect claude-stream-json starts the agent as a child process"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}
