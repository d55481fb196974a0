package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Verify checks what Build wrote to dir: SHA256SUMS lists exactly the
// archives, and each one's hash; each archive holds the licence files and a
// binary for its platform's OS and architecture that is statically linked.
func Verify(dir string, arts []Artifact) error {
	sums, err := readSums(filepath.Join(dir, sumsFile))
	if err != nil {
		return err
	}
	if len(sums) != len(arts) {
		return fmt.Errorf("%s lists %d files, but %d archives were built", sumsFile, len(sums), len(arts))
	}
	for _, a := range arts {
		want, ok := sums[a.Name]
		if !ok {
			return fmt.Errorf("%s does not list %s", sumsFile, a.Name)
		}
		body, err := os.ReadFile(filepath.Join(dir, a.Name))
		if err != nil {
			return err
		}
		got := sha256.Sum256(body)
		if hex.EncodeToString(got[:]) != want {
			return fmt.Errorf("%s: its SHA-256 is %x, but %s says %s", a.Name, got, sumsFile, want)
		}
		files, err := readArchive(filepath.Join(dir, a.Name))
		if err != nil {
			return err
		}
		for _, f := range packedFiles {
			if len(files[f]) == 0 {
				return fmt.Errorf("%s does not carry %s", a.Name, f)
			}
		}
		bin := files[a.Target.exe()]
		if len(bin) == 0 {
			return fmt.Errorf("%s does not carry the binary %s", a.Name, a.Target.exe())
		}
		if err := checkBinary(a.Target, bin); err != nil {
			return fmt.Errorf("%s: %s: %v", a.Name, a.Target.exe(), err)
		}
	}
	return nil
}

// readSums reads a SHA256SUMS file: name → hex hash.
func readSums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		hash, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(hash) != 64 || name == "" {
			return nil, fmt.Errorf("%s: line %q is not \"HASH  NAME\"", filepath.Base(path), sc.Text())
		}
		sums[name] = hash
	}
	return sums, sc.Err()
}

// checkBinary says whether bin is an executable for t, and, where the
// format says so, statically linked: an ELF binary with no interpreter, a
// Mach-O one that loads no library but the system's (Go on macOS always
// calls them, and every Mac has them), a PE one that imports no C runtime.
func checkBinary(t Target, bin []byte) error {
	r := bytes.NewReader(bin)
	switch t.OS {
	case "linux":
		f, err := elf.NewFile(r)
		if err != nil {
			return fmt.Errorf("not an ELF executable: %v", err)
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[t.Arch]
		if f.Machine != want {
			return fmt.Errorf("built for %v, not %v", f.Machine, want)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				return fmt.Errorf("dynamically linked (it has a program interpreter): was it built with CGO_ENABLED=1?")
			}
		}
	case "darwin":
		f, err := macho.NewFile(r)
		if err != nil {
			return fmt.Errorf("not a Mach-O executable: %v", err)
		}
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[t.Arch]
		if f.Cpu != want {
			return fmt.Errorf("built for %v, not %v", f.Cpu, want)
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			return err
		}
		for _, l := range libs {
			// Go without cgo still calls the system's libraries
			// (libSystem, libresolv for DNS, CoreFoundation and Security
			// for certificates): macOS ships them all.
			if !strings.HasPrefix(l, "/usr/lib/") && !strings.HasPrefix(l, "/System/Library/Frameworks/") {
				return fmt.Errorf("links %s, which a Mac may not have: was it built with CGO_ENABLED=1?", l)
			}
		}
	case "windows":
		f, err := pe.NewFile(r)
		if err != nil {
			return fmt.Errorf("not a PE executable: %v", err)
		}
		want := map[string]uint16{"amd64": pe.IMAGE_FILE_MACHINE_AMD64, "arm64": pe.IMAGE_FILE_MACHINE_ARM64}[t.Arch]
		if f.Machine != want {
			return fmt.Errorf("built for machine %#x, not %#x", f.Machine, want)
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			return err
		}
		for _, l := range libs {
			if strings.Contains(strings.ToLower(l), "msvcrt") || strings.Contains(strings.ToLower(l), "libgcc") {
				return fmt.Errorf("imports %s, a C runtime: was it built with CGO_ENABLED=1?", l)
			}
		}
	default:
		return fmt.Errorf("no check for %s", t)
	}
	return nil
}
