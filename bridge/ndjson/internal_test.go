package ndjson

import (
	"strings"
	"testing"
)

// A large line is handed over without a second copy, and its buffer is not
// kept afterwards: memory comes back after a big message. It has just the
// spare capacity a relay needs to lengthen an id in place.
func TestReader_LargeLineNotRetained(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	r := NewReader(strings.NewReader(big+"\nsmall\n"), 0)
	line, err := r.Next()
	if err != nil || len(line) != len(big) {
		t.Fatalf("Next = %d bytes, %v", len(line), err)
	}
	if cap(line) < len(line)+spare || cap(line) > len(line)+2+spare {
		t.Errorf("line has capacity %d for %d bytes", cap(line), len(line))
	}
	if line, err := r.Next(); err != nil || string(line) != "small" {
		t.Errorf("next line = %q, %v", line, err)
	}

}
