// Package bench measures the built acp-bridge binary the way an editor runs
// it: the bridge is its own process, the agent another (a fast fake ACP
// agent on a loopback WebSocket, or the bridge's child on stdio), and the
// test plays the editor on the bridge's stdin and stdout. The yardstick is a
// naive hand-written relay (testdata/naive) in front of the same agent, run
// interleaved with the bridge in the same run, so that the ratios hold on a
// busy machine where absolute figures do not. CPU is each relay process's
// own (its threads' on-CPU time from /proc), never the test's.
//
// The package holds no code: see process_test.go. Its tests are built only
// with the perf tag, so that `go test ./...` stays the correctness gate and
// timings are reported where they are asked for, never asserted in it:
//
//	go test -tags perf -run XXX -bench Process -benchtime=1x ./bench/   # the full run: ratios, medians, spread
//	go test -tags perf -run Process -v ./bench/                          # the short form CI runs as its own step
//	ACP_BENCH_BRIDGE_ARGS=--no-sessions go test -tags perf -run XXX -bench Process -benchtime=1x ./bench/   # without the session store
package bench
