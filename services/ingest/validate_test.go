package ingest

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// NUL bytes in arguments, the executable or the environment were accepted at submit and
// failed later in the incarnator; they are refused at submission now, naming the field,
// as are control characters in names of files and variables. Other characters in
// arguments and values are a quoted shell word's to carry, and pass.
func TestSubmitRefusesNULAndControlCharacters(t *testing.T) {
	s, err := New(Config{}, Deps{Store: &memStore{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ doc, field string }{
		{`{"version":3,"executable":"/bin/echo","arguments":["a\u0000b"]}`, "arguments[0]"},
		{`{"version":3,"executable":"/bin/ec\u0000ho"}`, "executable"},
		{`{"version":3,"executable":"/bin/echo","environment":{"x":"1\u0000"}}`, "environment[0].value"},
		{`{"version":3,"executable":"/bin/echo","stdout":"out\u001b[2J"}`, "stdout[0]"},
		{`{"version":3,"executable":"/bin/ech\no"}`, "executable"},
		{`{"version":3,"executable":"/bin/echo","input_files":{"a\u0007":"http://h/x"}}`, "stage_in[0].to"},
	} {
		_, err := s.Submit(t.Context(), Submission{File: "job.json", Data: []byte(c.doc)})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want a refusal naming %s", c.doc, err, c.field)
		}
	}
	ok := `{"version":3,"executable":"/bin/echo","arguments":["tab\there","line\nbreak","\u001b[31mred"],"environment":{"x":"a\nb"}}`
	if _, err := s.Submit(t.Context(), Submission{File: "job.json", Data: []byte(ok)}); err != nil {
		t.Errorf("control characters in arguments and values: %v", err)
	}
	if err := validateJob(&events.Job{Fields: map[string]string{"F\x00": "v"}}, &fieldCache{}); err == nil || !strings.Contains(err.Error(), "fields key") {
		t.Errorf("a NUL in a field name: %v", err)
	}
}

// Every string a job can hold is checked, whatever field it sits in: the walk skips
// fields it judges hold no string, so a NUL is planted in each string reachable from a
// Job in turn (through pointers, slices, arrays and maps, keys and values) and each must
// be refused. A field the walk wrongly skipped would pass here.
func TestValidateJobReachesEveryString(t *testing.T) {
	cache := &fieldCache{}
	n := 0
	root := reflect.New(reflect.TypeFor[events.Job]()).Elem()
	var plant func(v reflect.Value, path string, depth int, set func())
	plant = func(v reflect.Value, path string, depth int, set func()) {
		if depth > 6 {
			return
		}
		switch v.Kind() {
		case reflect.String:
			v.SetString("a\x00b")
			set()
			n++
			var j events.Job
			reflect.ValueOf(&j).Elem().Set(root)
			if err := validateJob(&j, cache); err == nil || !strings.Contains(err.Error(), "NUL") {
				t.Errorf("a NUL in %s: %v, want it refused", path, err)
			}
			v.SetString("")
			set()
		case reflect.Pointer:
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
				plant(v.Elem(), path, depth+1, set)
				v.Set(reflect.Zero(v.Type()))
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				return
			}
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			plant(v.Index(0), path+"[0]", depth+1, set)
			v.Set(reflect.Zero(v.Type()))
		case reflect.Array:
			if v.Type().Elem().Kind() != reflect.Uint8 && v.Len() > 0 {
				plant(v.Index(0), path+"[0]", depth+1, set)
			}
		case reflect.Map:
			key, elem := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			m := reflect.MakeMap(v.Type())
			v.Set(m)
			put := func() {
				m.SetMapIndex(reflect.Zero(v.Type().Key()), reflect.Value{})
				m.Clear()
				m.SetMapIndex(key, elem)
				set()
			}
			if key.Kind() == reflect.String {
				key.SetString("k")
			}
			put()
			plant(key, path+" key", depth+1, put)
			plant(elem, path+" value", depth+1, put)
			v.Set(reflect.Zero(v.Type()))
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					plant(v.Field(i), path+"."+v.Type().Field(i).Name, depth+1, set)
				}
			}
		}
	}
	plant(root, "Job", 0, func() {})
	if n < 20 {
		t.Fatalf("planted %d strings; the walk of the type found too few", n)
	}
	t.Logf("%d strings planted", n)
}
