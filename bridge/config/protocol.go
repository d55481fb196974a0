package config

import "fmt"

// ParseProtocol reads an ACP protocol version setting: "1" or "2" force
// that version, "auto" (or "") lets the peer's initialize choose, which is
// returned as 0.
func ParseProtocol(s string) (int, error) {
	switch s {
	case "", "auto":
		return 0, nil
	case "1":
		return 1, nil
	case "2":
		return 2, nil
	}
	return 0, fmt.Errorf("must be 1, 2 or auto, not %q", s)
}
