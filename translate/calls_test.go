package translate_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
)

// request is what a dialect might keep of a call: the agent's request id
// and the kind of call.
type request struct {
	agentID string
	kind    string
}

// deny is the refusal a withdrawn call's agent request gets in these tests.
func deny(r request) []translate.Out {
	return []translate.Out{{Kind: translate.Frame, Body: json.RawMessage(`{"id":"` + r.agentID + `","denied":true}`)}}
}

func TestCallsCall(t *testing.T) {
	var c translate.Calls[request]
	got := []translate.Out{
		c.Call("s1", "session/request_permission", json.RawMessage(`{"a":1}`), request{"7", "permission"}),
		c.Call("", "fs/read_text_file", json.RawMessage(`{"b":2}`), request{"8", "read"}),
	}
	want := []translate.Out{
		{Kind: translate.Call, Ref: 1, Method: "session/request_permission", Session: "s1", Body: json.RawMessage(`{"a":1}`)},
		{Kind: translate.Call, Ref: 2, Method: "fs/read_text_file", Body: json.RawMessage(`{"b":2}`)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Call outputs:\n got %+v\nwant %+v", got, want)
	}
}

func TestCallsTake(t *testing.T) {
	var c translate.Calls[request]
	c.Call("s1", "m", nil, request{"7", "permission"})
	r, ok, err := c.Take(1)
	if r != (request{"7", "permission"}) || !ok || err != nil {
		t.Errorf("Take(1) = %v, %v, %v; want the record, true, nil", r, ok, err)
	}
	// Answered once: a second answer, and an answer to a call never made,
	// are errors.
	for _, tt := range []struct {
		ref  translate.Ref
		want string
	}{
		{1, "editor answered call 1, which is not outstanding"},
		{2, "editor answered call 2, which is not outstanding"},
	} {
		r, ok, err := c.Take(tt.ref)
		if r != (request{}) || ok || err == nil || err.Error() != tt.want {
			t.Errorf("Take(%d) = %v, %v, %v; want the zero record, false and error %q", tt.ref, r, ok, err, tt.want)
		}
	}
}

// Dialect names the translator in the error, as its own errors do.
func TestCallsTakeDialect(t *testing.T) {
	c := translate.Calls[request]{Dialect: "acp-v0"}
	_, ok, err := c.Take(3)
	const want = "acp-v0: editor answered call 3, which is not outstanding"
	if ok || err == nil || err.Error() != want {
		t.Errorf("Take(3) = %v, %v; want false and error %q", ok, err, want)
	}
}

func TestCallsWithdraw(t *testing.T) {
	var c translate.Calls[request]
	// Enough calls that map order would show if Withdraw relied on it.
	for i := range 20 {
		kind := "permission"
		if i%2 == 1 {
			kind = "read"
		}
		c.Call("s1", "m", nil, request{string(rune('a' + i)), kind})
	}
	permissions := func(r request) bool { return r.kind == "permission" }
	got := c.Withdraw(permissions, deny)
	var want []translate.Out
	for i := 0; i < 20; i += 2 {
		want = append(want, translate.Out{Kind: translate.CancelCall, Ref: translate.Ref(i + 1), Session: "s1"})
		want = append(want, deny(request{string(rune('a' + i)), "permission"})...)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Withdraw(permissions) =\n %+v\nwant\n %+v", got, want)
	}
	// The calls not matched stay outstanding.
	if r, ok, err := c.Take(2); r != (request{"b", "read"}) || !ok || err != nil {
		t.Errorf("Take(2) after Withdraw = %v, %v, %v; want the read call", r, ok, err)
	}
	// A late answer to a withdrawn call is dropped once, without error; a
	// second one is an error.
	if r, ok, err := c.Take(1); r != (request{}) || ok || err != nil {
		t.Errorf("first late Take(1) = %v, %v, %v; want the zero record, false, nil", r, ok, err)
	}
	if _, ok, err := c.Take(1); ok || err == nil {
		t.Errorf("second late Take(1) = %v, %v; want false and an error", ok, err)
	}
	if got := c.Withdraw(permissions, deny); got != nil {
		t.Errorf("Withdraw with no permission outstanding = %+v, want nil", got)
	}
}

// A nil match withdraws every call, and a nil answer sends the agent
// nothing.
func TestCallsWithdrawAllUnanswered(t *testing.T) {
	var c translate.Calls[request]
	c.Call("", "m", nil, request{"1", "permission"})
	c.Call("", "m", nil, request{"2", "read"})
	got := c.Withdraw(nil, nil)
	want := []translate.Out{{Kind: translate.CancelCall, Ref: 1}, {Kind: translate.CancelCall, Ref: 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Withdraw(nil, nil) = %+v, want %+v", got, want)
	}
	if got := c.Withdraw(nil, deny); got != nil {
		t.Errorf("second Withdraw(nil, deny) = %+v, want nil", got)
	}
}

func TestCallsClear(t *testing.T) {
	var c translate.Calls[request]
	c.Call("s1", "m", nil, request{"1", "permission"})
	c.Call("s1", "m", nil, request{"2", "permission"})
	c.Withdraw(func(r request) bool { return r.agentID == "1" }, deny)
	c.Clear()
	if got := c.Withdraw(nil, deny); got != nil {
		t.Errorf("Withdraw after Clear = %+v, want nil", got)
	}
	if _, ok, err := c.Take(2); ok || err == nil {
		t.Errorf("Take(2) after Clear = %v, %v; want false and an error", ok, err)
	}
	// Withdrawn calls stay withdrawn: their late answers are still dropped.
	if _, ok, err := c.Take(1); ok || err != nil {
		t.Errorf("Take(1) of a call withdrawn before Clear = %v, %v; want false, nil", ok, err)
	}
	// Refs are not reused: an answer to a cleared call cannot be taken for
	// a new one.
	if out := c.Call("s1", "m", nil, request{"3", "permission"}); out.Ref != 3 {
		t.Errorf("Call after Clear has Ref %d, want 3", out.Ref)
	}
}
