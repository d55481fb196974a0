// Command release builds acp-bridge's release archives: static binaries
// (CGO_ENABLED=0, -trimpath) for linux, darwin and windows on amd64 and
// arm64, stamped with the version, revision and commit time through
// -ldflags -X (see internal/buildinfo), each packed with the licence and the
// documentation, and a SHA256SUMS file that `sha256sum -c` verifies.
//
//	go run ./tools/release snapshot            # dist/, version v0.0.0-snapshot.REV (for trying a build)
//	go run ./tools/release release v1.2.3      # dist/, for tag v1.2.3 (the tree must be clean)
//	go run ./tools/release check               # the dry run CI runs: build in a temporary
//	                                           # directory, verify every archive and checksum
//
// -targets GOOS/GOARCH,… limits the platforms; -dist DIR moves the output.
// It is a Go program rather than a GoReleaser configuration or a shell
// script so that it needs nothing but Go, on every platform it builds for.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(os.Stderr, "usage: go run ./tools/release [-targets GOOS/GOARCH,...] [-dist DIR] snapshot | release VERSION | check")
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

// run does what args say; out gets the archives' names, progress a line
// as each platform's build starts and ends (a build takes minutes).
func run(args []string, out, progress io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	targets := fs.String("targets", strings.Join(DefaultTargets, ","), "the GOOS/GOARCH pairs to build, comma-separated")
	dist := fs.String("dist", "dist", "the output directory (snapshot and release)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	ts, err := parseTargets(*targets)
	if err != nil {
		return usageError{err}
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	src, err := readSource(root)
	if err != nil {
		return err
	}
	mode := fs.Arg(0)
	switch {
	case mode == "snapshot" && fs.NArg() == 1:
		_, err := Build(Options{Root: root, Dist: *dist, Version: src.snapshotVersion(), Source: src, Targets: ts, Log: out, Progress: progress})
		return err
	case mode == "release" && fs.NArg() == 2:
		version := fs.Arg(1)
		if !validVersion(version) {
			return usageError{fmt.Errorf("release %q: the version is a tag such as v1.2.3 or v1.2.3-rc.1", version)}
		}
		if src.Modified {
			return fmt.Errorf("release %s: the working tree has uncommitted changes; commit or stash them, so the archives are built from revision %s alone", version, src.Revision)
		}
		_, err := Build(Options{Root: root, Dist: *dist, Version: version, Source: src, Targets: ts, Log: out, Progress: progress})
		return err
	case mode == "check" && fs.NArg() == 1:
		dir, err := os.MkdirTemp("", "acp-bridge-release-check-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		arts, err := Build(Options{Root: root, Dist: dir, Version: src.snapshotVersion(), Source: src, Targets: ts, Log: out, Progress: progress})
		if err != nil {
			return err
		}
		if err := Verify(dir, arts); err != nil {
			return err
		}
		fmt.Fprintf(out, "release check: %d archives built and verified against SHA256SUMS\n", len(arts))
		return nil
	case mode == "":
		return usageError{errors.New("say what to do: snapshot, release VERSION or check")}
	default:
		return usageError{fmt.Errorf("unknown mode or wrong arguments: %q", strings.Join(fs.Args(), " "))}
	}
}
