package wire

// plainPrefix returns how many bytes at the start of b a JSON string holds
// as they are: printable ASCII but the quote and the backslash. Sixteen
// bytes at a time with SSE2, which every amd64 has.
//
//go:noescape
func plainPrefix(b []byte) int
