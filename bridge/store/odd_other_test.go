//go:build !unix

package store

import "errors"

// oddTranscripts are the kinds of file a transcript may be that are not a
// regular file, on this platform (symlinks need a privilege on Windows).
var oddTranscripts = []string{"directory"}

func mkfifo(string) error { return errors.New("no FIFOs on this platform") }
