//go:build unix

package localfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO, a directory, a device or a file over the cap in the session
// directory is refused at once, never read: reading a FIFO with no writer
// (or /dev/zero) used to hang the bridge's shutdown.
func TestRead_OnlyRegularFilesUnderTheCap(t *testing.T) {
	root := t.TempDir()
	fifo := filepath.Join(root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	big := filepath.Join(root, "big.txt")
	if err := os.WriteFile(big, make([]byte, 2048), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(root, "dir"), 0o700)
	dev := filepath.Join(root, "zero")
	haveDev := syscall.Mknod(dev, syscall.S_IFCHR|0o600, 1<<8|5) == nil // /dev/zero's numbers; needs CAP_MKNOD
	for _, tc := range []struct {
		path string
		want error
	}{
		{fifo, ErrNotRegular},
		{filepath.Join(root, "dir"), ErrNotRegular},
		{big, ErrTooLarge},
		{dev, ErrNotRegular},
	} {
		if tc.path == dev && !haveDev {
			continue
		}
		done := make(chan error, 1)
		go func() {
			_, err := Read(ctx, root, tc.path, 0, 0, 1024)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, tc.want) {
				t.Errorf("Read(%s) = %v, want %v", tc.path, err, tc.want)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("Read(%s) blocked", tc.path)
		}
	}
	if got, err := Read(ctx, root, big, 0, 0, 4096); err != nil || len(got) != 2048 {
		t.Errorf("Read under a larger cap = %d bytes, %v", len(got), err)
	}
}

func TestWrite_OnlyRegularFilesUnderTheCap(t *testing.T) {
	root := t.TempDir()
	fifo := filepath.Join(root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- Write(ctx, root, fifo, "x", 0) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("Write(fifo) = %v, want ErrNotRegular", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Write(fifo) blocked")
	}
	if err := Write(ctx, root, filepath.Join(root, "a.txt"), strings.Repeat("x", 10), 5); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Write over the cap = %v, want ErrTooLarge", err)
	}
	if _, err := os.Stat(filepath.Join(root, "a.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused write created the file: %v", err)
	}
}
