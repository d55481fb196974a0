package rules

import (
	"fmt"
	"strings"
)

// gjsonModifiers are the modifiers gjson v1 knows; a path naming another
// one would silently read nothing at run time.
var gjsonModifiers = map[string]bool{
	"reverse": true, "ugly": true, "pretty": true, "this": true, "valid": true,
	"flatten": true, "join": true, "keys": true, "values": true, "tostr": true,
	"fromstr": true, "group": true, "dig": true,
}

// checkPath reports why p is not a gjson path this package accepts, or nil.
// gjson has no validator of its own (an unparsable path just reads
// nothing), so the checks here catch what would otherwise be a silent
// no-op: empty components, a dangling escape, unbalanced queries, unknown
// modifiers.
func checkPath(p string) error {
	if p == "" {
		return fmt.Errorf("the path is empty")
	}
	depth := 0
	var quote byte
	comp := 0 // length of the current component
	for i := 0; i < len(p); i++ {
		c := p[i]
		if quote != 0 {
			switch c {
			case '\\':
				i++
			case quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '\\':
			if i+1 >= len(p) {
				return fmt.Errorf("the path ends with a lone backslash")
			}
			i++
			comp++
		case '"':
			if depth == 0 {
				comp++
				continue
			}
			quote = c
		case '(':
			depth++
			comp++
		case ')':
			depth--
			if depth < 0 {
				return fmt.Errorf("unbalanced ')' at offset %d", i)
			}
			comp++
		case '.', '|':
			if depth > 0 {
				comp++
				continue
			}
			if comp == 0 {
				return fmt.Errorf("empty component before offset %d", i)
			}
			comp = 0
		case '@':
			if comp == 0 && depth == 0 {
				name := p[i+1:]
				if j := strings.IndexAny(name, ".|:"); j >= 0 {
					name = name[:j]
				}
				if !gjsonModifiers[name] {
					return fmt.Errorf("unknown modifier @%s", name)
				}
			}
			comp++
		default:
			comp++
		}
	}
	if quote != 0 {
		return fmt.Errorf("unterminated string in a query")
	}
	if depth != 0 {
		return fmt.Errorf("unbalanced '(' in a query")
	}
	if comp == 0 {
		return fmt.Errorf("the path ends with an empty component")
	}
	return nil
}
