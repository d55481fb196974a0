package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func vcsBuild(settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/acp-bridge/acp-bridge", Version: "(devel)"}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

const rev = "4b60e94a8e5f8da19f58694091f58807c992b017"

func TestRead(t *testing.T) {
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	tests := []struct {
		name                string
		bi                  *debug.BuildInfo
		ldVer, ldRev, ldTim string
		want                Info
		wantLine            string
	}{{
		name:     "no stamp at all (-buildvcs=false)",
		bi:       vcsBuild(),
		want:     Info{Version: "dev", Stamp: StampNone, Note: NoStampNote, GoVersion: "go1.26.8"},
		wantLine: "dev (no VCS stamp: built with -buildvcs=false or outside a checkout; go1.26.8" + platform,
	}, {
		name:     "VCS settings of a build in a checkout",
		bi:       vcsBuild("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-26T00:29:26Z", "vcs.modified", "false"),
		want:     Info{Version: "dev", Revision: rev, Time: "2026-11-26T00:29:26Z", Stamp: StampVCS, GoVersion: "go1.26.8"},
		wantLine: "dev (revision " + rev + ", 2026-11-26T00:29:26Z; go1.26.8" + platform,
	}, {
		name:     "VCS settings of a modified tree",
		bi:       vcsBuild("vcs.revision", rev, "vcs.time", "2026-11-26T00:29:26Z", "vcs.modified", "true"),
		want:     Info{Version: "dev", Revision: rev, Time: "2026-11-26T00:29:26Z", Modified: true, Stamp: StampVCS, GoVersion: "go1.26.8"},
		wantLine: "dev (revision " + rev + ", modified, 2026-11-26T00:29:26Z; go1.26.8" + platform,
	}, {
		name:  "the linker's stamp wins over VCS settings",
		bi:    vcsBuild("vcs.revision", "0000000000000000000000000000000000000000", "vcs.modified", "true"),
		ldVer: "v1.2.3", ldRev: rev, ldTim: "2026-11-26T01:00:00Z",
		want:     Info{Version: "v1.2.3", Revision: rev, Time: "2026-11-26T01:00:00Z", Stamp: StampLinker, GoVersion: "go1.26.8"},
		wantLine: "v1.2.3 (revision " + rev + ", 2026-11-26T01:00:00Z; go1.26.8" + platform,
	}, {
		name:  "a linker version alone",
		bi:    vcsBuild(),
		ldVer: "v1.2.3",
		want:  Info{Version: "v1.2.3", Stamp: StampLinker, GoVersion: "go1.26.8"},
	}, {
		name: "go install module@version",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.4.0"}},
		want: Info{Version: "v0.4.0", Stamp: StampVCS, GoVersion: "go1.26.8"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := read(tt.bi, tt.ldVer, tt.ldRev, tt.ldTim)
			tt.want.OS, tt.want.Arch = runtime.GOOS, runtime.GOARCH
			if got != tt.want {
				t.Errorf("read = %+v\nwant   %+v", got, tt.want)
			}
			if tt.wantLine != "" && got.String() != tt.wantLine {
				t.Errorf("String() = %q\nwant       %q", got.String(), tt.wantLine)
			}
			if got.Short() != tt.want.Version {
				t.Errorf("Short() = %q, want %q", got.Short(), tt.want.Version)
			}
		})
	}
}

// A test binary carries no VCS stamp and no linker stamp: Read says so
// rather than a bare "dev".
func TestRead_TestBinary(t *testing.T) {
	got := Read()
	if got.Version != Dev || got.Stamp != StampNone || !strings.Contains(got.String(), NoStampNote) {
		t.Errorf("Read() in a test binary = %+v, %q", got, got.String())
	}
	if got.GoVersion != runtime.Version() {
		t.Errorf("GoVersion = %q, want %q", got.GoVersion, runtime.Version())
	}
}
