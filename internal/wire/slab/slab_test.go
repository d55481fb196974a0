package slab

import (
	"bytes"
	"testing"
)

func TestCopiesAreTheCallers(t *testing.T) {
	var s Slab
	a := s.Copy([]byte("first"))
	b := s.Copy([]byte("second"))
	if string(a) != "first" || string(b) != "second" {
		t.Fatalf("copies %q %q", a, b)
	}
	if cap(a) != len(a) {
		t.Errorf("a carved slice has room after it (cap %d, len %d): appending would overwrite the next message", cap(a), len(a))
	}
	_ = append(a, "XXXX"...)
	if string(b) != "second" {
		t.Errorf("appending to one copy changed the next: %q", b)
	}
	if e := (&Slab{}).Copy(nil); e == nil {
		t.Errorf("an empty message came back nil: an empty frame is not an absent one")
	}
	src := []byte("source")
	c := s.Copy(src)
	src[0] = 'X'
	if string(c) != "source" {
		t.Errorf("the copy shares the source's memory: %q", c)
	}
}

func TestOneAllocationPerBlock(t *testing.T) {
	var s Slab
	msg := bytes.Repeat([]byte("x"), 200)
	allocs := testing.AllocsPerRun(1000, func() { s.Copy(msg) })
	if want := 200.0 / BlockSize * 2; allocs > want {
		t.Errorf("%.3f allocations per 200-byte copy, want at most %.3f (one per block)", allocs, want)
	}
	big := bytes.Repeat([]byte("y"), MaxCarved+1)
	if c := s.Copy(big); !bytes.Equal(c, big) || cap(c) != len(big) {
		t.Errorf("a large message was not copied whole into a slice of its own")
	}
}
