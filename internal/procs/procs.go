// Package procs decides, before the program's other packages initialize,
// how many Ps (GOMAXPROCS) acp-bridge runs on: one when the editor's stdin
// is a pipe or a socket and the environment does not set GOMAXPROCS, which
// is how an editor starts the stdio relay (see relayProcs in internal/cli
// for why the relay runs on one P). Package main imports it first so that
// its init runs early.
//
// Why so early: runtime.GOMAXPROCS stops the world and frees the caches of
// the Ps it drops. Called once serving starts, after every package's init
// and the command line, it took 1.0–2.2 ms of start-up on a 2-CPU VM (the
// dropped P's cached spans go back to the heap's lists, each list's first
// block a fresh page); called here, before most packages have allocated
// anything, 0.1–0.6 ms.
//
// A command other than the stdio relay (a listener, a conformance run)
// calls Default, and gets the runtime's default back.
package procs

import (
	"os"
	"runtime"
)

// one says init set one P and nothing has given the default back since.
var one bool

func init() {
	if os.Getenv("GOMAXPROCS") == "" && StdinPollable() {
		runtime.GOMAXPROCS(1)
		one = true
	}
}

// Default gives the process the runtime's default number of Ps back (and
// its updates as the CPU limit changes), if init took them away.
func Default() {
	if one {
		one = false
		runtime.SetDefaultGOMAXPROCS()
	}
}
