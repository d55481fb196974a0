//go:build allocprofile

package cli

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startAllocProfile samples every 4 KiB allocated rather than the runtime's
// 512 KiB, so that a per-frame allocation of a few dozen bytes shows up in
// a run of a few seconds; the file is created at once, so that a path that
// cannot be written is reported when the run starts, not when it ends.
func startAllocProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "acp-bridge: %s: cannot create the allocation profile: %v; running without it\n", allocProfileEnv, err)
		return func() {}
	}
	runtime.MemProfileRate = 4 << 10
	return func() {
		runtime.GC() // the profile counts allocations up to the last collection
		err := pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "acp-bridge: %s: writing the allocation profile %s: %v\n", allocProfileEnv, path, err)
		}
	}
}
