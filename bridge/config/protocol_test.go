package config

import (
	"strings"
	"testing"
)

func TestEditorProtocol(t *testing.T) {
	for _, c := range []struct {
		src  string
		want int
		err  string
	}{
		{`editor_protocol = 2`, 2, ""},
		{`editor_protocol = "1"`, 1, ""},
		{`editor_protocol = "auto"`, 0, ""},
		{``, 0, ""},
		{`editor_protocol = 3`, 0, `must be 1, 2 or auto, not "3"`},
	} {
		cfg, diags := Parse([]byte(c.src+"\n"), "t.hcl")
		switch {
		case c.err != "":
			if !diags.HasErrors() || !strings.Contains(diags.Error(), c.err) {
				t.Errorf("%s: diagnostics %v, want %q", c.src, diags, c.err)
			}
		case diags.HasErrors():
			t.Errorf("%s: %v", c.src, diags)
		case cfg.EditorProtocol != c.want:
			t.Errorf("%s: EditorProtocol = %d, want %d", c.src, cfg.EditorProtocol, c.want)
		}
	}
}
