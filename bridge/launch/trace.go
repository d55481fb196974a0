package launch

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/acp-bridge/acp-bridge/bridge/config"
)

// Trace flags: --trace FILE records every message on both hops (see package
// toolkit/trace), "%p" in FILE standing for the process id; --trace-append
// adds to an existing FILE, which is refused otherwise; --trace-max caps
// the file.
const (
	FlagTrace       = "trace"
	FlagTraceAppend = "trace-append"
	FlagTraceMax    = "trace-max"
)

// TraceMax parses --trace-max: a size such as 10MiB; "" means no cap.
func TraceMax(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := config.ParseSize(s)
	if err == nil && n <= 0 {
		err = fmt.Errorf("%s is not a positive size", s)
	}
	if err != nil {
		return 0, Usagef("--%s: %v", FlagTraceMax, err)
	}
	return n, nil
}

// expandPID replaces every "%p" in name by the process id, as the trace
// writer does for --trace FILE; it is repeated here so that launch, which
// the engine's tools build on, does not import the toolkit.
func expandPID(name string) string {
	return strings.ReplaceAll(name, "%p", strconv.Itoa(os.Getpid()))
}
