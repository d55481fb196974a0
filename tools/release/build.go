package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The module and the package whose variables -ldflags -X stamps.
const (
	modulePath   = "github.com/acp-bridge/acp-bridge"
	buildinfoPkg = modulePath + "/internal/buildinfo"
	binaryName   = "acp-bridge"
	sumsFile     = "SHA256SUMS"
)

// DefaultTargets are the platforms a release supports.
var DefaultTargets = []string{
	"linux/amd64", "linux/arm64",
	"darwin/amd64", "darwin/arm64",
	"windows/amd64", "windows/arm64",
}

// packedFiles are the repository files every archive carries beside the
// binary: the licence travels with the code, as Apache-2.0 asks. The
// pages the README links to (docs/*.md) go too, so that its links work in
// an unpacked archive.
var packedFiles = []string{"LICENSE", "NOTICE", "README.md", "CHANGELOG.md"}

// packedDocs are the documentation pages every archive carries, relative
// to the repository's root, in a stable order.
func packedDocs(root string) ([]string, error) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	var rel []string
	for _, p := range pages {
		rel = append(rel, "docs/"+filepath.Base(p))
	}
	sort.Strings(rel)
	return rel, nil
}

// Target is one platform.
type Target struct{ OS, Arch string }

func (t Target) String() string { return t.OS + "/" + t.Arch }

// exe is the binary's file name on the target.
func (t Target) exe() string {
	if t.OS == "windows" {
		return binaryName + ".exe"
	}
	return binaryName
}

func parseTargets(list string) ([]Target, error) {
	var ts []Target
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(DefaultTargets, s) {
			return nil, fmt.Errorf("-targets: %q is not a supported platform; the supported ones are %s", s, strings.Join(DefaultTargets, ", "))
		}
		goos, goarch, _ := strings.Cut(s, "/")
		ts = append(ts, Target{goos, goarch})
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("-targets: no platform given; the supported ones are %s", strings.Join(DefaultTargets, ", "))
	}
	return ts, nil
}

// Source is the revision being built.
type Source struct {
	Revision string    // the commit hash; empty outside a git checkout
	Time     time.Time // the commit's time: archive entries carry it, so builds are reproducible
	Modified bool      // uncommitted changes
}

// readSource asks git which revision root is at. Outside a checkout the
// build is still possible, unstamped by a revision and dated now.
func readSource(root string) (Source, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return Source{Time: time.Now().UTC().Truncate(time.Second)}, nil
	}
	when, err := git("log", "-1", "--format=%cI", "HEAD")
	if err != nil {
		return Source{}, fmt.Errorf("git log in %s: %v", root, err)
	}
	t, err := time.Parse(time.RFC3339, when)
	if err != nil {
		return Source{}, fmt.Errorf("git log in %s gave the commit time %q: %v", root, when, err)
	}
	status, err := git("status", "--porcelain")
	if err != nil {
		return Source{}, fmt.Errorf("git status in %s: %v", root, err)
	}
	return Source{Revision: rev, Time: t.UTC(), Modified: status != ""}, nil
}

// snapshotVersion names a build that is not a release: a semver
// pre-release of v0.0.0 that carries the revision.
func (s Source) snapshotVersion() string {
	v := "v0.0.0-snapshot"
	if s.Revision != "" {
		v += "." + s.Revision[:min(12, len(s.Revision))]
	}
	if s.Modified {
		v += ".modified"
	}
	return v
}

var versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func validVersion(v string) bool { return versionRE.MatchString(v) }

// moduleRoot is the directory of acp-bridge's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", modulePath).Output()
	if err != nil {
		return "", fmt.Errorf("cannot find the %s module (run this inside the repository): go list -m: %v", modulePath, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Options say what Build builds.
type Options struct {
	Root    string // the module root
	Dist    string // the output directory, created if needed
	Version string
	Source  Source
	Targets []Target
	Log     io.Writer // one line per archive: its name and platform
	// Progress, when set, gets a line as each platform's build starts and
	// as it ends, with how long it took (a cold build takes minutes), and
	// one per archive written. The command gives it stderr.
	Progress io.Writer
	// Now is the clock the durations are read from; nil means time.Now.
	Now func() time.Time
}

// Artifact is one archive Build wrote.
type Artifact struct {
	Target Target
	Name   string // the file name in Dist
	SHA256 string // hex
}

// Build compiles every target, packs each into an archive in Dist and
// writes Dist/SHA256SUMS.
func Build(o Options) ([]Artifact, error) {
	if err := os.MkdirAll(o.Dist, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "acp-bridge-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	var arts []Artifact
	for i, t := range o.Targets {
		bin := filepath.Join(work, t.OS+"-"+t.Arch, t.exe())
		fmt.Fprintf(progress, "release: building %s (%d of %d) …\n", t, i+1, len(o.Targets))
		start := now()
		if err := compile(o, t, bin); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "release: building %s done in %s\n", t, seconds(now().Sub(start)))
		start = now()
		a, err := pack(o, t, bin)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "release: archive %s written in %s\n", filepath.Join(o.Dist, a.Name), seconds(now().Sub(start)))
		fmt.Fprintf(o.Log, "%s  %s\n", a.Name, t)
		arts = append(arts, a)
	}
	var sums strings.Builder
	for _, a := range arts {
		// The format sha256sum -c reads: hash, two spaces, file name.
		fmt.Fprintf(&sums, "%s  %s\n", a.SHA256, a.Name)
	}
	if err := os.WriteFile(filepath.Join(o.Dist, sumsFile), []byte(sums.String()), 0o644); err != nil {
		return nil, err
	}
	return arts, nil
}

// seconds is d for a person: "41.2s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
}

// ldflags stamps the build (see internal/buildinfo) and drops the symbol
// table and DWARF, which a release binary does not need.
func ldflags(o Options) string {
	flags := []string{"-s", "-w", "-X", buildinfoPkg + ".version=" + o.Version}
	if o.Source.Revision != "" {
		flags = append(flags, "-X", buildinfoPkg+".revision="+o.Source.Revision)
	}
	flags = append(flags, "-X", buildinfoPkg+".buildTime="+o.Source.Time.Format(time.RFC3339))
	return strings.Join(flags, " ")
}

func compile(o Options, t Target, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags(o), "-o", out, modulePath)
	cmd.Dir = o.Root
	// Static binaries: no cgo, so nothing links against the C library.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s failed: go build: %v\n%s", t, err, stderr.String())
	}
	return nil
}

// pack writes the archive of one target: a .tar.gz, or a .zip for
// Windows, whose entries sit in a directory named like the archive and
// carry the commit's time, so that the same revision packs to the same
// bytes.
func pack(o Options, t Target, bin string) (Artifact, error) {
	base := fmt.Sprintf("%s_%s_%s_%s", binaryName, strings.TrimPrefix(o.Version, "v"), t.OS, t.Arch)
	type entry struct {
		name string
		mode int64
		body []byte
	}
	binBody, err := os.ReadFile(bin)
	if err != nil {
		return Artifact{}, err
	}
	entries := []entry{{t.exe(), 0o755, binBody}}
	docs, err := packedDocs(o.Root)
	if err != nil {
		return Artifact{}, err
	}
	for _, f := range append(slices.Clip(packedFiles), docs...) {
		b, err := os.ReadFile(filepath.Join(o.Root, f))
		if err != nil {
			return Artifact{}, fmt.Errorf("packing %s: %v (every archive carries %s)", t, err, strings.Join(packedFiles, ", "))
		}
		entries = append(entries, entry{f, 0o644, b})
	}
	var buf bytes.Buffer
	name := base + ".tar.gz"
	if t.OS == "windows" {
		name = base + ".zip"
		zw := zip.NewWriter(&buf)
		for _, e := range entries {
			h := &zip.FileHeader{Name: base + "/" + e.name, Method: zip.Deflate, Modified: o.Source.Time}
			h.SetMode(os.FileMode(e.mode))
			w, err := zw.CreateHeader(h)
			if err != nil {
				return Artifact{}, err
			}
			if _, err := w.Write(e.body); err != nil {
				return Artifact{}, err
			}
		}
		if err := zw.Close(); err != nil {
			return Artifact{}, err
		}
	} else {
		gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		gz.ModTime = o.Source.Time
		tw := tar.NewWriter(gz)
		for _, e := range entries {
			h := &tar.Header{Name: base + "/" + e.name, Mode: e.mode, Size: int64(len(e.body)),
				ModTime: o.Source.Time, Typeflag: tar.TypeReg, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
			if err := tw.WriteHeader(h); err != nil {
				return Artifact{}, err
			}
			if _, err := tw.Write(e.body); err != nil {
				return Artifact{}, err
			}
		}
		if err := tw.Close(); err != nil {
			return Artifact{}, err
		}
		if err := gz.Close(); err != nil {
			return Artifact{}, err
		}
	}
	if err := os.WriteFile(filepath.Join(o.Dist, name), buf.Bytes(), 0o644); err != nil {
		return Artifact{}, err
	}
	sum := sha256.Sum256(buf.Bytes())
	return Artifact{Target: t, Name: name, SHA256: hex.EncodeToString(sum[:])}, nil
}

// readArchive returns the files of an archive Build wrote, by their name
// inside its top directory.
func readArchive(path string) (map[string][]byte, error) {
	files := map[string][]byte{}
	add := func(name string, r io.Reader) error {
		_, rest, ok := strings.Cut(name, "/")
		if !ok || rest == "" {
			return fmt.Errorf("%s: entry %q is not inside the archive's directory", filepath.Base(path), name)
		}
		b, err := io.ReadAll(r)
		files[rest] = b
		return err
	}
	if strings.HasSuffix(path, ".zip") {
		zr, err := zip.OpenReader(path)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				return nil, err
			}
			err = add(f.Name, rc)
			rc.Close()
			if err != nil {
				return nil, err
			}
		}
		return files, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Base(path), err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", filepath.Base(path), err)
		}
		if err := add(h.Name, tr); err != nil {
			return nil, err
		}
	}
}
