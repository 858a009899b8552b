package ingest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// nameFields are the canonical fields that name files or shell names on a target:
// besides NUL, no control character is allowed in them (a file name could carry one, but
// only to deceive whoever lists it; a variable name cannot). Arguments and environment
// values may hold any character but NUL: a quoted shell word carries them.
var nameFields = map[string]bool{
	"executable": true, "directory": true, "library_path": true, "stdin": true, "stdout": true,
	"stderr": true, "default_storage_base": true, "stage_in": true, "stage_out": true, "cleanup": true,
	"environment.name": true,
}

// validateJob refuses a job holding a value no target can carry: a NUL byte anywhere (no
// C string, argv entry, environment entry or file name can hold one), or a control
// character in a file or variable name. Every problem is named by its field path.
func validateJob(j events.Job) error {
	var errs []error
	walkStrings(reflect.ValueOf(j), "", "", func(path, field, s string) {
		if i := strings.IndexByte(s, 0); i >= 0 {
			errs = append(errs, fmt.Errorf("%s: holds a NUL byte at offset %d, which no argument, variable or file name can carry", path, i))
			return
		}
		if nameFields[field] {
			if i := strings.IndexFunc(s, isControl); i >= 0 {
				errs = append(errs, fmt.Errorf("%s: holds the control character %q at offset %d, which a file or variable name must not", path, s[i], i))
			}
		}
	})
	return errors.Join(errs...)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 }

// walkStrings calls f with every string below v (map keys too), its path in the job's
// JSON names ("arguments[2]", "environment[0].value") and its top-level field name
// ("environment.name" for variable names). Byte slices (the original document) are not
// strings and are skipped.
func walkStrings(v reflect.Value, path, field string, f func(path, field, s string)) {
	switch v.Kind() {
	case reflect.String:
		f(path, field, v.String())
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkStrings(v.Elem(), path, field, f)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			walkStrings(v.Index(i), fmt.Sprintf("%s[%d]", path, i), field, f)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			k := fmt.Sprint(iter.Key().Interface())
			walkStrings(iter.Key(), path+" key "+fmt.Sprintf("%q", k), field, f)
			walkStrings(iter.Value(), path+"."+k, field, f)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				name = sf.Name
			}
			sub := name
			if path != "" {
				sub = path + "." + name
			}
			fld := field
			switch {
			case field == "":
				fld = name
			case field == "environment" && name == "name":
				fld = "environment.name"
			}
			walkStrings(v.Field(i), sub, fld, f)
		}
	}
}
