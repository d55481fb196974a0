package hugepage

import (
	"runtime"
	"testing"
	"unsafe"
)

func TestBytesBeforeStartAreTheHeaps(t *testing.T) {
	reset()
	b := Bytes(32 << 10)
	if len(b) != 0 || cap(b) != 32<<10 {
		t.Fatalf("Bytes(32 KiB) = len %d cap %d, want len 0 cap 32 KiB", len(b), cap(b))
	}
	if Owns(b) {
		t.Error("a buffer handed out before Start is the region's: an idle bridge would fault the huge page in")
	}
}

func TestBytesAfterStart(t *testing.T) {
	reset()
	Start()
	a, b := Bytes(64<<10), Bytes(32<<10)
	if len(a) != 0 || cap(a) != 64<<10 || cap(b) != 32<<10 {
		t.Fatalf("caps %d, %d; want 64 KiB, 32 KiB", cap(a), cap(b))
	}
	if runtime.GOOS != "linux" {
		if Owns(a) || Owns(b) {
			t.Fatal("a region outside Linux")
		}
		return
	}
	if !Owns(a) || !Owns(b) {
		t.Fatal("buffers handed out after Start are not the region's")
	}
	if pa, pb := addr(a), addr(b); pa%Size != 0 || pb != pa+64<<10 {
		t.Errorf("region buffers at %#x and %#x: want the first at a huge page's start, the second right after it", pa, pb)
	}

	// Filling a up to its capacity, then past it, leaves b alone.
	b = append(b, "b's own"...)
	a = append(a, make([]byte, 64<<10)...)
	for i := range a {
		a[i] = 'a'
	}
	grown := append(a, 'x')
	if Owns(grown) {
		t.Error("a buffer grown past its capacity is still in the region")
	}
	if string(b) != "b's own" {
		t.Errorf("b = %q after a was filled and grown", b)
	}

	// Once the region is used up, buffers come from the heap, whole.
	rest := Size - 96<<10
	if c := Bytes(rest); !Owns(c) || cap(c) != rest {
		t.Fatalf("the region's last %d bytes: cap %d, owned %v", rest, cap(c), Owns(c))
	}
	if d := Bytes(1); Owns(d) || cap(d) != 1 {
		t.Errorf("Bytes(1) from a full region: cap %d, owned %v; want the heap's", cap(d), Owns(d))
	}
	if Owns(nil) || Owns(make([]byte, 8)) {
		t.Error("Owns reports heap memory as the region's")
	}
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
