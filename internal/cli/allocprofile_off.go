//go:build !allocprofile

package cli

import (
	"fmt"
	"os"
)

// startAllocProfile says, when asked for a profile, that this binary
// cannot write one (see allocProfileEnv) and how to build one that can.
func startAllocProfile(path string) (stop func()) {
	if path != "" {
		fmt.Fprintf(os.Stderr, "acp-bridge: %s: this binary was built without allocation profiles, which cost every run memory; build one with 'go build -tags allocprofile'; running without\n", allocProfileEnv)
	}
	return func() {}
}
