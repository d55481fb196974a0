package config

import (
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/gocty"
)

// fromEnv marks cty values computed by env(). HCL carries marks through
// templates and collections, so the evaluator can tell which arguments hold
// environment values and keep them out of logs.
type envMark struct{}

var fromEnv = envMark{}

// envFunc is env(NAME) or env(NAME, DEFAULT): the value of the environment
// variable NAME. An unset variable without a default is an error naming it,
// so that a missing token fails at load time with the line that needs it
// instead of as an unexplained 401 from the agent. A variable set to the
// empty string counts as set.
var envFunc = function.New(&function.Spec{
	Description: "Returns the value of an environment variable.",
	Params: []function.Parameter{
		{Name: "name", Type: cty.String},
	},
	VarParam: &function.Parameter{Name: "default", Type: cty.String},
	Type:     function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		if len(args) > 2 {
			return cty.NilVal, function.NewArgErrorf(2, "env takes a variable name and at most one default value")
		}
		name := args[0].AsString()
		if v, ok := os.LookupEnv(name); ok {
			return cty.StringVal(v).Mark(fromEnv), nil
		}
		if len(args) == 2 {
			return args[1].Mark(fromEnv), nil
		}
		return cty.NilVal, function.NewArgErrorf(0,
			"environment variable %s is not set (give a default with env(%q, \"…\") to make it optional)", name, name)
	},
})

// lenientEnv is env() for Check: an unset variable without a default
// yields a placeholder and is reported to missing, instead of being an
// error, so that the rest of the file is still checked.
func lenientEnv(missing func(name string)) function.Function {
	return function.New(&function.Spec{
		Params:   []function.Parameter{{Name: "name", Type: cty.String}},
		VarParam: &function.Parameter{Name: "default", Type: cty.String},
		Type:     function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			name := args[0].AsString()
			if _, ok := os.LookupEnv(name); !ok && len(args) == 1 {
				missing(name)
				return cty.StringVal("unset-" + name).Mark(fromEnv), nil
			}
			return envFunc.Call(args)
		},
	})
}

func evalContext() *hcl.EvalContext {
	return &hcl.EvalContext{Functions: map[string]function.Function{"env": envFunc}}
}

// evaluator evaluates arguments and accumulates diagnostics. Its methods
// return ok=false for an absent or null argument or after an error.
type evaluator struct {
	ctx *hcl.EvalContext
	// lenient (Check) makes an unset environment variable a warning.
	lenient bool
	dir     string // directory of the file, for relative paths
	diags   hcl.Diagnostics
}

func (e *evaluator) errorf(rng hcl.Range, summary, format string, args ...any) {
	e.diags = append(e.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  rng.Ptr(),
	})
}

// eval evaluates attr's expression. When lenient, an env() of an unset
// variable is a warning and a placeholder stands in for its value.
func (e *evaluator) eval(attr *hcl.Attribute) (cty.Value, hcl.Diagnostics) {
	if !e.lenient {
		return attr.Expr.Value(e.ctx)
	}
	var missing []string
	ctx := &hcl.EvalContext{Functions: map[string]function.Function{
		"env": lenientEnv(func(name string) { missing = append(missing, name) }),
	}}
	v, diags := attr.Expr.Value(ctx)
	for _, name := range missing {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Environment variable not set",
			Detail: fmt.Sprintf("%s is not set. Serving this agent fails until it is (or give a default with env(%q, \"…\")); checking the file does not need it.",
				name, name),
			Subject: attr.Expr.Range().Ptr(),
		})
	}
	return v, diags
}

// value evaluates attr, converts it to ty and returns it unmarked, with the
// paths of the parts that came from env().
func (e *evaluator) value(attr *hcl.Attribute, ty cty.Type) (cty.Value, []cty.PathValueMarks, bool) {
	if attr == nil {
		return cty.NilVal, nil, false
	}
	v, diags := e.eval(attr)
	e.diags = append(e.diags, diags...)
	if diags.HasErrors() || v.IsNull() {
		return cty.NilVal, nil, false
	}
	v, marks := v.UnmarkDeepWithPaths()
	if !v.IsWhollyKnown() {
		e.errorf(attr.Expr.Range(), "Invalid argument value", "The value of %s must be known.", attr.Name)
		return cty.NilVal, nil, false
	}
	cv, err := convert.Convert(v, ty)
	if err != nil {
		e.errorf(attr.Expr.Range(), "Incorrect attribute value type",
			"Inappropriate value for attribute %q: %s required.", attr.Name, ty.FriendlyName())
		return cty.NilVal, nil, false
	}
	if cv.IsNull() {
		return cty.NilVal, nil, false
	}
	return cv, marks, true
}

func (e *evaluator) str(attr *hcl.Attribute) (string, bool) {
	s, _, ok := e.strMarked(attr)
	return s, ok
}

// strMarked also reports whether any part of the string came from env().
func (e *evaluator) strMarked(attr *hcl.Attribute) (s string, fromEnv bool, ok bool) {
	v, marks, ok := e.value(attr, cty.String)
	if !ok {
		return "", false, false
	}
	return v.AsString(), len(marks) > 0, true
}

// path is str with a relative path resolved against the file's directory.
func (e *evaluator) path(attr *hcl.Attribute) (string, bool) {
	s, ok := e.str(attr)
	if ok && s != "" && !filepath.IsAbs(s) {
		s = filepath.Join(e.dir, s)
	}
	return s, ok
}

// strList returns a list of strings and, per element, whether it came from
// env().
func (e *evaluator) strList(attr *hcl.Attribute) ([]string, []bool, bool) {
	v, marks, ok := e.value(attr, cty.List(cty.String))
	if !ok {
		return nil, nil, false
	}
	var list []string
	if err := gocty.FromCtyValue(v, &list); err != nil {
		e.errorf(attr.Expr.Range(), "Incorrect attribute value type",
			"Inappropriate value for attribute %q: a list of strings is required.", attr.Name)
		return nil, nil, false
	}
	fromEnv := make([]bool, len(list))
	for _, m := range marks {
		if len(m.Path) == 0 {
			// The whole list came from a marked value.
			for i := range fromEnv {
				fromEnv[i] = true
			}
			continue
		}
		if idx, ok := m.Path[0].(cty.IndexStep); ok {
			if i, acc := idx.Key.AsBigFloat().Int64(); acc == 0 && i >= 0 && int(i) < len(fromEnv) {
				fromEnv[i] = true
			}
		}
	}
	return list, fromEnv, true
}

func (e *evaluator) strMap(attr *hcl.Attribute) (map[string]string, bool) {
	v, _, ok := e.value(attr, cty.Map(cty.String))
	if !ok {
		return nil, false
	}
	m := map[string]string{}
	if err := gocty.FromCtyValue(v, &m); err != nil {
		e.errorf(attr.Expr.Range(), "Incorrect attribute value type",
			"Inappropriate value for attribute %q: a map of strings is required.", attr.Name)
		return nil, false
	}
	return m, true
}

// DurationRule says which durations a setting accepts and what zero means.
type DurationRule int

const (
	// Positive accepts only a duration greater than zero.
	Positive DurationRule = iota
	// ZeroDisables reads "0s" and "off" as "disabled", returned as -1
	// (request_timeout, bridge.Bridge.RequestTimeout).
	ZeroDisables
	// ZeroDerives reads "0s" as "derive it", returned as 0, and "off" as
	// "disabled", returned as -1 (ping_period, legacy.WebSocket.PingPeriod).
	ZeroDerives
)

// duration parses a Go duration string ("30s", "1m30s") or "off".
func (e *evaluator) duration(attr *hcl.Attribute, rule DurationRule) (time.Duration, bool) {
	s, ok := e.str(attr)
	if !ok {
		return 0, false
	}
	d, err := ParseDuration(s, rule)
	if err != nil {
		e.errorf(attr.Expr.Range(), "Invalid duration", "%s: %s.", attr.Name, err)
		return 0, false
	}
	return d, true
}

// ParseDuration parses a Go duration string ("30s", "1m30s", "500ms") or
// "off" under rule; the command line's duration flags use it too, so that
// they mean what the file means.
func ParseDuration(s string, rule DurationRule) (time.Duration, error) {
	if strings.EqualFold(s, "off") {
		if rule == Positive {
			return 0, fmt.Errorf("%q cannot be turned off; give a duration such as \"30s\"", s)
		}
		return -1, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"30s\", \"1m30s\" or \"500ms\"", s)
	}
	switch {
	case d < 0:
		return 0, fmt.Errorf("%q is negative", s)
	case d == 0 && rule == Positive:
		return 0, fmt.Errorf("%q must be greater than zero", s)
	case d == 0 && rule == ZeroDisables:
		return -1, nil
	}
	return d, nil
}

// Bounds of queue_bytes: the budget of each queue toward a slow peer (a
// message larger than it still passes, alone).
const (
	QueueSizeMin = 4 << 10
	QueueSizeMax = 1 << 30
)

// Bounds of max_message: below 1 KiB not even initialize fits; above 1 GiB
// one line would be held in memory whole. DefaultMaxMessage is the engine's
// default (bridge.Bridge.MaxMessage), used for the agent hop too.
const (
	MessageSizeMin    = 1 << 10
	MessageSizeMax    = 1 << 30
	DefaultMaxMessage = 64 << 20
)

// size parses a byte size: a whole number of bytes, or a string with a
// unit (see ParseSize).
func (e *evaluator) size(attr *hcl.Attribute, lo, hi int64) (int64, bool) {
	if attr == nil {
		return 0, false
	}
	v, diags := e.eval(attr)
	e.diags = append(e.diags, diags...)
	if diags.HasErrors() || v.IsNull() {
		return 0, false
	}
	v, _ = v.UnmarkDeep()
	var n int64
	var err error
	switch {
	case v.Type() == cty.Number:
		bf := v.AsBigFloat()
		if bf.IsInt() && bf.Sign() >= 0 && bf.Cmp(new(big.Float).SetInt64(math.MaxInt64)) <= 0 {
			n, _ = bf.Int64()
		} else {
			err = fmt.Errorf("%s is not a whole number of bytes", bf.Text('g', -1))
		}
	case v.Type() == cty.String:
		n, err = ParseSize(v.AsString())
	default:
		err = fmt.Errorf("a size such as \"64MiB\" is required")
	}
	if err == nil && (n < lo || n > hi) {
		err = fmt.Errorf("%d bytes is outside the accepted range %s to %s", n, FormatSize(lo), FormatSize(hi))
	}
	if err != nil {
		e.errorf(attr.Expr.Range(), "Invalid size", "%s: %s.", attr.Name, err)
		return 0, false
	}
	return n, true
}

// sizeUnits are the accepted units, matched case-insensitively. Binary
// units (KiB, MiB, GiB) are powers of 1024; KB, MB and GB are decimal SI
// units (powers of 1000), as their names say.
var sizeUnits = map[string]int64{
	"":    1,
	"b":   1,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"kb":  1000,
	"mb":  1000 * 1000,
	"gb":  1000 * 1000 * 1000,
}

// ParseSize parses a byte size: a whole number followed by an optional unit
// B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000), with
// optional space between, such as "64MiB" or "1048576".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	if i == 0 || !ok {
		return 0, fmt.Errorf("%q is not a size such as \"64MiB\" (units: B, KiB, MiB, GiB, KB, MB, GB)", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * unit, nil
}

// FormatSize formats n bytes with the largest binary unit dividing it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
