//go:build unix

package trace

import (
	"errors"
	"syscall"
)

// noFollow makes an open fail on a symbolic link, so that a link planted
// where a trace or a page is to be written cannot aim the write elsewhere.
const noFollow = syscall.O_NOFOLLOW

// isLoop reports whether err is open's answer to O_NOFOLLOW on a link.
func isLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }
