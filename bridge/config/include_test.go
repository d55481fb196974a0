package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A dialect block may include its profile from a file next to the
// configuration: the dialect then holds the file's body and text, and
// diagnostics about the profile point into that file.
func TestInclude(t *testing.T) {
	dir := t.TempDir()
	profile := "summary = \"mine\"\nrequest \"session/prompt\" {\n  send = { text = prompt.text }\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "mine.hcl"), []byte(profile), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(cfgPath, []byte("dialect \"mine\" {\n  include = \"mine.hcl\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(cfgPath)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if len(cfg.Dialects) != 1 {
		t.Fatalf("%d dialects, want 1", len(cfg.Dialects))
	}
	ud := cfg.Dialects[0]
	if ud.Name != "mine" || ud.Source != profile || ud.File != filepath.Join(dir, "mine.hcl") {
		t.Errorf("dialect = %q from %q, source %q", ud.Name, ud.File, ud.Source)
	}
	attrs, _ := ud.Body.JustAttributes()
	if _, ok := attrs["summary"]; !ok {
		t.Errorf("the dialect's body is not the included file's: %v", attrs)
	}
	if cfg.Files[ud.File] == nil {
		t.Errorf("Files lacks the included file, so its diagnostics could not be shown")
	}
}

func TestInclude_bad(t *testing.T) {
	tests := []struct {
		name, config, summary, at, inDetail string
	}{
		{"missing file", "dialect \"x\" {\n  include = \"nope.hcl\"\n}\n", "Failed to read profile", "config.hcl:2:13", "nope.hcl"},
		{"not a string", "dialect \"x\" {\n  include = 3\n}\n", "Invalid include", "config.hcl:2:13", "constant string"},
		{"with other lines", "dialect \"x\" {\n  include = \"x.hcl\"\n  summary = \"y\"\n}\n", "include stands alone", "config.hcl:2:3", "that file"},
		{"a directory", "dialect \"x\" {\n  include = \".\"\n}\n", "Failed to read profile", "config.hcl:2:13", "not a regular file"},
		{"syntax error in the file", "dialect \"x\" {\n  include = \"broken.hcl\"\n}\n", "Missing newline after argument", "broken.hcl:1:15", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "broken.hcl"), []byte("summary = \"a\" \"b\"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "config.hcl")
			if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, diags := Load(path)
			if !diags.HasErrors() {
				t.Fatalf("Load succeeded; want %q", tt.summary)
			}
			for _, d := range diags {
				if d.Summary != tt.summary {
					continue
				}
				at := ""
				if d.Subject != nil {
					at = fmt.Sprintf("%s:%d:%d", filepath.Base(d.Subject.Filename), d.Subject.Start.Line, d.Subject.Start.Column)
				}
				if at != tt.at || !strings.Contains(d.Detail, tt.inDetail) {
					t.Errorf("%s at %s (%s), want at %s naming %q", d.Summary, at, d.Detail, tt.at, tt.inDetail)
				}
				if cfg.Dialects != nil || cfg.Files[path] == nil {
					t.Errorf("on error Load returned dialects %v and files %v, want only Files", cfg.Dialects, cfg.Files)
				}
				return
			}
			t.Errorf("no %q diagnostic: %s", tt.summary, diags.Error())
		})
	}
}
