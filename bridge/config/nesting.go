package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// maxNesting bounds how deeply brackets may nest in a configuration file.
// The HCL parser is recursive: a file of a million "[" overflows its stack,
// a fatal error no recover can catch. No configuration needs more than a
// handful of levels.
const maxNesting = 1000

// checkNesting reports a configuration nested deeper than maxNesting, at the
// bracket that goes too deep, before the parser sees it. It skips strings
// and comments; a bracket inside a heredoc counts, which can only make a
// pathological file fail early.
func checkNesting(src []byte, filename string) hcl.Diagnostics {
	depth, line, col := 0, 1, 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		col++
		switch {
		case c == '\n':
			line, col = line+1, 0
		case c == '"':
			for i++; i < len(src) && src[i] != '"' && src[i] != '\n'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case c == '#' || c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			line, col = line+1, 0
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			for i += 2; i+1 < len(src) && !(src[i] == '*' && src[i+1] == '/'); i++ {
				if src[i] == '\n' {
					line, col = line+1, 0
				}
			}
			i++
		case c == '[' || c == '{' || c == '(':
			if depth++; depth > maxNesting {
				pos := hcl.Pos{Line: line, Column: col, Byte: i}
				return hcl.Diagnostics{{
					Severity: hcl.DiagError,
					Summary:  "Nested too deeply",
					Detail:   fmt.Sprintf("Brackets nest more than %d levels deep here; no configuration needs that many.", maxNesting),
					Subject:  &hcl.Range{Filename: filename, Start: pos, End: pos},
				}}
			}
		case c == ']' || c == '}' || c == ')':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
