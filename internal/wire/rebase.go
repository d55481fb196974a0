package wire

import "unsafe"

// Rebase points env, which ParseEnvelope read from from, at to, a copy of
// from's bytes: every field that shares from's memory (see Envelope) then
// shares to's at the same offset, and from may be reused. The fields that
// do not (the names the scan knows, which are constants) stay as they are.
// It is what a reader that lends its buffer for one message needs to keep
// one that it did not hand on at once, without parsing it again.
func (env *Envelope) Rebase(from, to []byte) {
	if len(from) == 0 || len(to) < len(from) {
		return
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(from)))
	// offset reports where p lies in from. A field may end where from
	// does, so an empty one may start there.
	offset := func(p unsafe.Pointer, n int) (int, bool) {
		a := uintptr(p)
		if p == nil || a < base || a+uintptr(n) > base+uintptr(len(from)) {
			return 0, false
		}
		return int(a - base), true
	}
	bytesIn := func(b []byte) []byte {
		if i, ok := offset(unsafe.Pointer(unsafe.SliceData(b)), len(b)); ok {
			// (Capacity ends with the field: an append copies it
			// rather than write over what follows.)
			return to[i : i+len(b) : i+len(b)]
		}
		return b
	}
	stringIn := func(s string) string {
		if i, ok := offset(unsafe.Pointer(unsafe.StringData(s)), len(s)); ok && len(s) > 0 {
			return unsafe.String(&to[i], len(s))
		}
		return s
	}
	env.Version = stringIn(env.Version)
	env.Frame = bytesIn(env.Frame)
	env.ID = bytesIn(env.ID)
	env.Method = stringIn(env.Method)
	env.Params = bytesIn(env.Params)
	env.Result = bytesIn(env.Result)
	env.Error = bytesIn(env.Error)
	env.SessionID = stringIn(env.SessionID)
	env.UpdateKind = stringIn(env.UpdateKind)
}
