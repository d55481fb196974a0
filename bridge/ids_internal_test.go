package bridge

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
)

// TestIDKeyShortWayAgrees checks that the short way for plain integers
// gives the key the long way does, for every id it takes and around its
// bounds.
func TestIDKeyShortWayAgrees(t *testing.T) {
	ids := []string{"0", "1", "9", "10", "00", "01", "-0", "-1", "1.0", "7.0", "1e3", `"1"`, "null",
		"999999999999999999", "1000000000000000000", "9223372036854775807", "9223372036854775808",
		"99999999999999999999", "123456789012345678", "1234567890123456789"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		n := r.Uint64() >> r.IntN(64)
		ids = append(ids, strconv.FormatUint(n, 10))
	}
	for _, id := range ids {
		raw := []byte(id)
		if got, want := idKey(raw), parsedIDKey(raw); got != want {
			t.Errorf("idKey(%s) = %q, the long way %q", id, got, want)
		}
	}
	if !plainInteger([]byte("42")) || plainInteger([]byte("042")) || plainInteger([]byte("4.2")) {
		t.Error("plainInteger takes the wrong ids")
	}
}

// TestParamsSessionAgrees checks paramsSession against gjson, which it
// skips when the params cannot hold the member.
func TestParamsSessionAgrees(t *testing.T) {
	for _, p := range []string{`{}`, `{"n":1}`, `{"sessionId":"s1"}`, `{"a":{"sessionId":"x"}}`,
		`{"session\u0049d":"esc"}`, `{"sessionId":7}`, `[1,2]`, `{"sessionIdx":"no","sessionId":"yes"}`,
		`{"x":"\"sessionId\""}`, ``, `null`} {
		if got, want := paramsSession([]byte(p)), gjson.GetBytes([]byte(p), "sessionId").Str; got != want {
			t.Errorf("paramsSession(%s) = %q, gjson %q", p, got, want)
		}
	}
}
