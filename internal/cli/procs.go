package cli

import (
	"os"
	"runtime"
)

// relayProcs runs the stdio relay on one P (GOMAXPROCS=1) when stdin is
// polled (editorInput) and the environment does not set GOMAXPROCS, and
// returns the number of Ps the relay runs on. It is the one process-wide
// runtime setting the bridge makes, made here, where the relay starts;
// every other command keeps the runtime's default.
//
// A relay's work is a pipeline of short steps on a few goroutines: the
// child's pump, the link that parses and routes, the editor's writer, the
// store's writer. With a P per CPU, each hand-off between them wakes an
// idle P's thread (a futex wake, a spinning M looking for work, the
// goroutine moved to another CPU); with one P, a goroutine made ready runs
// next on the same thread. Measured through the built binary against the
// naive relay, 5 reps each on a quiet 2-core VM, the same build with and
// without this: the bridge's CPU per update 1.52x the naive relay's
// through a child against 2.89x, 1.13x over a WebSocket against 1.36x,
// and the echo's added p50 13-15 us against 78-85 us.
//
// Nothing the bridge does needs a second CPU: the loop that owns the
// state is one goroutine anyway, and a goroutine in a blocking system
// call (a child's exit waited for, the store's fsyncs) has its P handed to
// another thread by the runtime. A stdin that cannot be polled (a
// terminal) would be read by a thread blocked in the kernel holding the
// only P, so the runtime's default stays then; GOMAXPROCS in the
// environment the editor gives the agent overrides both.
func relayProcs(polled bool) int {
	if polled && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	return runtime.GOMAXPROCS(0)
}
