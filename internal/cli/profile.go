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

// startCPUProfile starts the CPU profile that cpuProfileEnv asks for and
// returns the function that stops it and closes the file; with the
// variable unset it does nothing. Failing to start a profile is reported
// on stderr and does not stop the bridge: profiling is for contributors,
// and the editor still needs its agent.
func startCPUProfile() (stop func()) {
	path := os.Getenv(cpuProfileEnv)
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
