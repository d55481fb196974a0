package bridge

import (
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"github.com/acp-bridge/acp-bridge/translate"
)

// TestAgentEventResetClearsAllButTheEnvelope: the read loop reuses one
// event for every frame, and reset must leave nothing of the frame before
// but the envelope, which prepare writes whole.
func TestAgentEventResetClearsAllButTheEnvelope(t *testing.T) {
	var ev agentEvent
	v := reflect.ValueOf(&ev).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Interface:
			f.Set(reflect.ValueOf(errors.New("before")))
		case reflect.Struct:
			f.FieldByName("Method").SetString("before")
		default:
			t.Fatalf("field %s: set it for this test", v.Type().Field(i).Name)
		}
	}
	l := &link{}
	frame := []byte("{}")
	ev.reset(l, frame, true, true)
	want := agentEvent{link: l, frame: frame, borrowed: true, env: translate.Envelope{Method: "before"}}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("after reset: %+v\nwant %+v", ev, want)
	}
	ev.reset(l, frame, false, false)
	if want := (agentEvent{link: l, frame: frame}); !reflect.DeepEqual(ev, want) {
		t.Errorf("after reset without parsing: %+v\nwant %+v", ev, want)
	}
}
