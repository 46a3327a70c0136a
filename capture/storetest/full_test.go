package storetest

import (
	"reflect"
	"testing"
	"time"
)

// TestFullRecordsSetEveryField keeps the round-trip tests honest: a field
// added to the data model must be set in the full records, so that a
// backend that forgets to store it fails the suite.
func TestFullRecordsSetEveryField(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for name, v := range map[string]any{
		"Session":  fullSession("s", start),
		"Exchange": fullExchange(1, "s", start),
		"Message":  fullMessage(1, "s", 1),
	} {
		checkSet(t, name, reflect.ValueOf(v).Elem())
	}
}

func checkSet(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			t.Errorf("%s is nil", path)
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || v.Type() == reflect.TypeOf(time.Time{}) {
		if v.IsZero() {
			t.Errorf("%s is not set in the full record", path)
		}
		return
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue // not part of the record (Message.File is a handle for the writer)
		}
		checkSet(t, path+"."+f.Name, v.Field(i))
	}
}
