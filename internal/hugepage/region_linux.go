package hugepage

import (
	"syscall"
	"unsafe"
)

// mapRegion maps Size bytes aligned to Size and asks for a transparent
// huge page there (MADV_HUGEPAGE: the systems that have them mostly give
// them only to memory that asks, "madvise" in
// /sys/kernel/mm/transparent_hugepage/enabled). Nothing is touched: the
// page is faulted in, whole, by its first use. nil when the mapping fails.
func mapRegion() []byte {
	// Twice the size, to find an aligned one inside; the rest stays
	// mapped, never touched, so costs address space only.
	raw, err := syscall.Mmap(-1, 0, 2*Size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
	off := int((Size - p%Size) % Size)
	b := raw[off : off+Size : off+Size]
	// Refused where the kernel has no transparent huge pages: the region
	// then works on base pages, as the heap would.
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE)
	return b[:0]
}
