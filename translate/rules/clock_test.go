package rules

import "time"

// nanotime is the benchmarks' clock (tests may read clocks; translators
// may not).
func nanotime() int64 { return time.Now().UnixNano() }
