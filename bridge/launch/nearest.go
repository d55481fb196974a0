package launch

import (
	"fmt"
	"strings"
)

// Nearest returns the candidate closest to word, within two edits (a
// transposition counts as one), or "" when none is that close. A candidate
// every letter of which would have to change (the alias o for --foo) is no
// suggestion.
func Nearest(word string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestDist && d < len(c) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// UnknownDialect is the usage error for a dialect name that is none of
// the known ones: the nearest name, then all of them.
func UnknownDialect(name string) error {
	hint := ""
	if s := Nearest(name, DialectNames()); s != "" {
		hint = fmt.Sprintf(" Did you mean %q?", s)
	}
	return Usagef("unknown dialect %q.%s The known dialects are: %s", name, hint, strings.Join(DialectNames(), ", "))
}
