package cli

import (
	"os"
	"runtime"
)

// relayProcs runs the stdio relay on one P (GOMAXPROCS=1) when stdin is
// polled (editorInput) and the environment does not set GOMAXPROCS, which
// the runtime has then applied. It returns the number of Ps the relay
// runs on.
//
// A relay's work is a pipeline of short steps on a few goroutines: the
// child's pump, the link that parses and routes, the editor's writer, the
// store's writer. With a P per CPU, each hand-off between them wakes an
// idle P's thread (a futex wake, a spinning M looking for work, the
// goroutine moved to another CPU), and sysmon, seeing Ps in system calls
// while others run, keeps waking every 20 µs. With one P, a goroutine made
// ready runs next on the same thread, and one thread waits for the editor
// and the agent in one epoll_wait. Measured through the built binary
// (200k and 1M updates, 2-CPU VM, medians of 8-10 interleaved pairs): the
// bridge's own CPU per update fell by 22-30% through a child agent and
// 17-22% over a WebSocket, and its rate rose by 8-19%; a request the
// editor sent while an agent flooded it was answered as fast either way
// (its wait is the editor queue's depth). It costs a child's echo about
// 16 µs (the poller's wake-ups) and start-up 2-3 ms (docs/performance.md).
//
// Nothing the bridge does needs a second CPU: the loop that owns the
// state is one goroutine anyway, and a system call that blocks (the
// store's writes and fsyncs) hands the P to another thread, as it always
// does. One P bounds the bridge at about two million updates a second,
// far beyond any agent's stream. A stdin that cannot be polled (a
// terminal) would be read by a thread blocked in the kernel holding the
// only P, so the runtime's default stays then; GOMAXPROCS in the
// environment the editor gives the agent overrides both.
func relayProcs(polled bool) int {
	if polled && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	return runtime.GOMAXPROCS(0)
}
