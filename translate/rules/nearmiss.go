package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// NearMissMark introduces, in what the bridge says of a frame no rule
// matched (the unmatched-frames note, the quiet warning, a given-up turn's
// error), the rule whose match misses that frame by a typo: one condition
// whose value or key is a small edit away from the frame's. acp-bridge
// doctor quotes what follows it as the match to edit.
const NearMissMark = "; the rule that likely meant it: "

// nearMissMax bounds the frames nearMiss searches, and nearMissKeys the
// keys of one object it compares with a misspelt key: an unmatched frame
// costs a few walks of at most this much.
const (
	nearMissMax  = 16 << 10
	nearMissKeys = 256
)

// nearMiss says which rule of the profile misses frame by a typo, in
// words ("event \"done\" matches { \"op\" = \"dnoe\" }, and the frame has
// \"op\" = \"done\""), or "" when none does. A rule misses by a typo when
// every condition of its match that compares with a constant holds but one,
// and that one is a small edit from the frame: the value at its path (a
// string a letter or two off, or only in case), or its path (a key the
// frame has under a name a letter or two off, holding the wanted value).
// Conditions on variables and states are not judged: they depend on the
// turn, not on the text of the profile. Of several such rules the closest
// wins, then the first in the profile's order. Frames over nearMissMax
// bytes are not searched: each rule may walk the frame, and a typo shows
// as well in the small frames that go with a big one.
func (p *Profile) nearMiss(frame []byte) string {
	if len(frame) > nearMissMax {
		return ""
	}
	best, bestDist := "", 0
	try := func(what string, m *match) {
		if m == nil {
			return
		}
		if d, why, ok := m.missedBy(frame); ok && (best == "" || d < bestDist) {
			best, bestDist = what+" matches "+m.String()+", and the frame "+why, d
		}
	}
	if c := p.connect; c != nil {
		try("connect's expect", c.expect)
		try("connect's reject", c.reject)
	}
	if hb := p.heartbeat; hb != nil {
		try("heartbeat's reply", hb.reply)
	}
	if c := p.cancel; c != nil {
		try("cancel's ack", c.ack)
	}
	for i, er := range p.errors {
		what := "the error block"
		if len(p.errors) > 1 {
			what = fmt.Sprintf("error block %d", i+1)
		}
		try(what, er.match)
	}
	methods := make([]string, 0, len(p.requests))
	for m := range p.requests {
		methods = append(methods, m)
	}
	slices.Sort(methods)
	for _, m := range methods {
		if r := p.requests[m].reply; r != nil {
			try(fmt.Sprintf("the reply of request %q", m), r.match)
		}
	}
	for _, r := range p.events {
		try(fmt.Sprintf("event %q", r.name), r.match)
	}
	return best
}

// missedBy reports whether frame misses m by one typo: the edit distance
// and what the frame has instead.
func (m *match) missedBy(frame []byte) (dist int, why string, ok bool) {
	judged := 0
	for i := range m.conds {
		c := &m.conds[i]
		if c.state != "" || c.ref != nil {
			continue
		}
		judged++
		got := get(frame, c.path)
		if c.holds(got) {
			continue
		}
		if ok {
			return 0, "", false // a second condition fails: not a typo
		}
		if dist, why, ok = c.nearly(frame, got); !ok {
			return 0, "", false
		}
	}
	return dist, why, ok && judged > 0
}

// holds reports whether the constant condition c holds for got.
func (c *cond) holds(got gjson.Result) bool {
	switch {
	case c.absent:
		return !got.Exists()
	case !got.Exists():
		return false
	case c.present:
		return true
	}
	for _, w := range c.want {
		if sameValue(got, w) {
			return true
		}
	}
	return false
}

// nearly reports whether the failed condition c misses frame by a typo:
// in the value at its path, or in the path's last key.
func (c *cond) nearly(frame []byte, got gjson.Result) (int, string, bool) {
	if c.absent {
		return 0, "", false
	}
	if got.Exists() {
		if got.Type != gjson.String {
			return 0, "", false
		}
		best, ok := 0, false
		for _, w := range c.want {
			if w.Type != gjson.String {
				continue
			}
			if d, near := typo(got.Str, w.Str); near && (!ok || d < best) {
				best, ok = d, true
			}
		}
		if !ok {
			return 0, "", false
		}
		return best, "has " + strconv.Quote(c.path) + " = " + strconv.Quote(got.Str), true
	}
	// The key may be misspelt: a sibling a small edit away holding what
	// the condition wants.
	if strings.ContainsAny(c.path, `*?#|@\`) {
		return 0, "", false
	}
	parent, key := "", c.path
	if i := strings.LastIndexByte(c.path, '.'); i >= 0 {
		parent, key = c.path[:i], c.path[i+1:]
	}
	obj := gjson.ParseBytes(frame)
	if parent != "" {
		obj = get(frame, parent)
	}
	if !obj.IsObject() {
		return 0, "", false
	}
	best, bestKey, ok, seen := 0, "", false, 0
	obj.ForEach(func(k, v gjson.Result) bool {
		d, near := typo(k.Str, key)
		if near && (!ok || d < best) && (c.present || c.holds(v)) {
			best, bestKey, ok = d, k.Str, true
		}
		seen++
		return seen < nearMissKeys
	})
	if !ok {
		return 0, "", false
	}
	found := bestKey
	if parent != "" {
		found = parent + "." + bestKey
	}
	return best, "has " + strconv.Quote(found) + " instead", true
}

// typo reports whether got differs from want by a typo: a few letters
// changed, added, dropped or swapped (optimal string alignment distance,
// one for short words, two up to ten letters, three beyond), or only the
// case. A one-letter word is never a typo of another.
func typo(got, want string) (int, bool) {
	if got == want {
		return 0, false
	}
	if strings.EqualFold(got, want) {
		return 1, true
	}
	n := max(len(got), len(want))
	limit := 1
	switch {
	case n > 10:
		limit = 3
	case n > 5:
		limit = 2
	}
	if n < 2 || abs(len(got)-len(want)) > limit {
		return 0, false
	}
	d := osa(got, want)
	return d, d <= limit && d < n
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// osa is the optimal string alignment distance of a and b, by bytes:
// insertions, deletions, substitutions and swaps of neighbours.
func osa(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
