// Package buildinfo says which build of acp-bridge is running: its version,
// the VCS revision and commit time it was built from, the Go version and the
// platform. A bug report quoting `acp-bridge version` then names one build.
//
// Release builds are stamped by the linker (scripts/release.sh does this):
//
//	go build -ldflags "-X github.com/acp-bridge/acp-bridge/internal/buildinfo.version=v1.2.3
//	  -X github.com/acp-bridge/acp-bridge/internal/buildinfo.revision=$(git rev-parse HEAD)
//	  -X github.com/acp-bridge/acp-bridge/internal/buildinfo.buildTime=2026-11-26T00:00:00Z"
//
// Other builds fall back to what the go command recorded: the module version
// of `go install module@version`, and the vcs.revision, vcs.time and
// vcs.modified settings of a build inside a git checkout. A build with
// neither (GOFLAGS=-buildvcs=false, or built outside a checkout) says so,
// rather than a bare "dev" that names no build at all.
//
// The variables live here, not in package main, so that the -X paths stay
// the same wherever the command layer lives.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker for release builds; see the package comment.
var (
	version   = ""
	revision  = ""
	buildTime = ""
)

// Dev is the version of a build that carries no release version.
const Dev = "dev"

// NoStampNote explains a build that carries neither a linker stamp nor VCS
// information, in the words `acp-bridge version` prints.
const NoStampNote = "no VCS stamp: built with -buildvcs=false or outside a checkout"

// Stamp sources: where Info's revision came from.
const (
	StampLinker = "ldflags" // -ldflags -X, a release build
	StampVCS    = "vcs"     // the go command's vcs.* build settings
	StampNone   = "none"    // neither: the build cannot be identified
)

// Info describes one build. Its JSON form is what `acp-bridge version
// --json` prints.
type Info struct {
	Version   string `json:"version"`            // v1.2.3, or "dev"
	Revision  string `json:"revision,omitempty"` // the full commit hash
	Time      string `json:"time,omitempty"`     // the commit's (or the release build's) time, RFC 3339
	Modified  bool   `json:"modified"`           // built from a tree with uncommitted changes
	Stamp     string `json:"stamp"`              // StampLinker, StampVCS or StampNone
	GoVersion string `json:"go_version"`         // the toolchain that built it, e.g. go1.26.8
	OS        string `json:"os"`                 // GOOS
	Arch      string `json:"arch"`               // GOARCH
	Note      string `json:"note,omitempty"`     // NoStampNote when Stamp is StampNone
}

// Read returns the running binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return read(bi, version, revision, buildTime)
}

// read combines the linker stamp with the go command's build information;
// bi may be nil (a binary built without module support).
func read(bi *debug.BuildInfo, ldVersion, ldRevision, ldTime string) Info {
	info := Info{
		Version:   ldVersion,
		GoVersion: runtime.Version(),
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
	}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version // go install module@version
		}
	}
	if info.Version == "" {
		info.Version = Dev
	}
	switch {
	case ldRevision != "":
		info.Revision, info.Time, info.Stamp = ldRevision, ldTime, StampLinker
	case bi != nil && setting(bi, "vcs.revision") != "":
		info.Revision = setting(bi, "vcs.revision")
		info.Time = setting(bi, "vcs.time")
		info.Modified = setting(bi, "vcs.modified") == "true"
		info.Stamp = StampVCS
	case ldVersion != "":
		// A release version without a revision still names a build.
		info.Time, info.Stamp = ldTime, StampLinker
	case info.Version != Dev:
		// go install module@version: the version names the source.
		info.Stamp = StampVCS
	default:
		info.Stamp, info.Note = StampNone, NoStampNote
	}
	return info
}

func setting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// Short is the version alone, as the bridge reports itself to editors and
// agents (agentInfo.version, clientInfo.version).
func (i Info) Short() string { return i.Version }

// String is the one line `acp-bridge version` prints, without the program
// name:
//
//	v1.2.3 (revision 4b60e94a8e5f8da19f58694091f58807c992b017, 2026-11-26T00:29:26Z; go1.26.8 linux/amd64)
//	dev (revision 4b60e94a8e5f…, modified, 2026-11-26T00:29:26Z; go1.26.8 linux/amd64)
//	dev (no VCS stamp: built with -buildvcs=false or outside a checkout; go1.26.8 linux/amd64)
func (i Info) String() string {
	var parts []string
	if i.Revision != "" {
		parts = append(parts, "revision "+i.Revision)
	}
	if i.Modified {
		parts = append(parts, "modified")
	}
	if i.Time != "" {
		parts = append(parts, i.Time)
	}
	if i.Note != "" {
		parts = append(parts, i.Note)
	}
	build := strings.Join(parts, ", ")
	if build != "" {
		build += "; "
	}
	return fmt.Sprintf("%s (%s%s %s/%s)", i.Version, build, i.GoVersion, i.OS, i.Arch)
}
