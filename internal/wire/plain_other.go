//go:build !amd64

package wire

// plainPrefix returns how many bytes at the start of b a JSON string holds
// as they are: printable ASCII but the quote and the backslash.
func plainPrefix(b []byte) int { return plainPrefixSWAR(b) }
