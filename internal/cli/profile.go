package cli

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names the file a CPU profile of the whole run is written
// to. It is an environment variable rather than a flag because an editor
// launches the bridge with a command line of its own making: a contributor
// who wants to see where a real agent's stream spends its time sets the
// variable in the editor's agent configuration and leaves the command as
// it is. Read the file with `go tool pprof <binary> FILE`.
const cpuProfileEnv = "ACP_BRIDGE_CPUPROFILE"

// allocProfileEnv names the file the run's allocations are written to when
// it ends, for the same readers and for the same reason: a relayed frame
// that allocates costs the collector's work later, on another goroutine,
// where a CPU profile shows it without saying whose garbage it was. Read it
// with `go tool pprof -sample_index=alloc_objects <binary> FILE`.
//
// Only a binary built with -tags allocprofile writes one (allocprofile.go):
// a binary that can write a heap profile keeps memory profiling on from its
// start, and pages in some 300 KB more of itself at every run (its idle
// RSS, measured), which every user would pay for a contributors' tool.
const allocProfileEnv = "ACP_BRIDGE_ALLOCPROFILE"

// startProfiles starts the profiles that cpuProfileEnv and allocProfileEnv
// ask for and returns the function that writes them and closes their files;
// with neither variable set it does nothing. Failing to write a profile is
// reported on stderr and does not stop the bridge: profiling is for
// contributors, and the editor still needs its agent.
func startProfiles() (stop func()) {
	stopCPU := startCPUProfile(os.Getenv(cpuProfileEnv))
	stopAllocs := startAllocProfile(os.Getenv(allocProfileEnv))
	return func() {
		stopCPU()
		stopAllocs()
	}
}

func startCPUProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "acp-bridge: %s: cannot create the CPU profile: %v; running without it\n", cpuProfileEnv, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		fmt.Fprintf(os.Stderr, "acp-bridge: %s: cannot start the CPU profile: %v; running without it\n", cpuProfileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "acp-bridge: %s: writing the CPU profile %s: %v\n", cpuProfileEnv, path, err)
		}
	}
}
