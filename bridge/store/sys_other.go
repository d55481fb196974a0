//go:build !unix

package store

import (
	"io/fs"
	"os"
)

// noFollow: no such flag here; symbolic links are refused where the
// listing sees them.
const noFollow = 0

// checkOwner: ownership is not checked on this system.
func checkOwner(dir string, st fs.FileInfo, private bool) error { return nil }

func uid() string {
	if u := os.Getenv("USERNAME"); u != "" {
		return u
	}
	return "user"
}
