package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSessions_Attributes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.hcl")
	os.WriteFile(path, []byte("sessions = false\nstate_dir = \"st\"\nsession_idle = \"5s\"\nhistory_preamble = false\nmax_sessions = 7\nsession_max_age = \"48h\"\nagent \"a\" {\n  command = [\"x\"]\n}\n"), 0o600)
	cfg, diags := Load(path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s := cfg.Sessions
	if !s.Off || s.StateDir != filepath.Join(dir, "st") || s.Idle != 5*time.Second || !s.NoPreamble || s.MaxSessions != 7 || s.MaxAge != 48*time.Hour {
		t.Fatalf("%+v", s)
	}
}
