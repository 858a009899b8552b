package stager

import "testing"

// A name starting with an environment variable is read from where the submitter's
// environment says; any other name, or a variable in the middle, stays as written.
func TestExpandLeadingVar(t *testing.T) {
	env := map[string]string{"DDS_LOCATION": "/opt/dds", "EMPTY": ""}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, c := range []struct{ in, want, err string }{
		{"$DDS_LOCATION/tutorials/task", "/opt/dds/tutorials/task", ""},
		{"${DDS_LOCATION}/task", "/opt/dds/task", ""},
		{"$DDS_LOCATION", "/opt/dds", ""},
		{"$DDS_LOCATIONX/task", "", "the path starts with $DDS_LOCATIONX, which is not set in the submitter's environment"},
		{"$EMPTY/task", "", "the path starts with $EMPTY, which is not set in the submitter's environment"},
		{"$DDS_LOCATION.d/task", "$DDS_LOCATION.d/task", ""},
		{"${DDS_LOCATION/task", "${DDS_LOCATION/task", ""},
		{"dir/$DDS_LOCATION/task", "dir/$DDS_LOCATION/task", ""},
		{"plain.txt", "plain.txt", ""},
	} {
		got, err := expandLeadingVar(c.in, getenv)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.in, got, err, c.want)
		}
	}
	if got, err := expandLeadingVar("$DDS_LOCATION/x", nil); err != nil || got != "$DDS_LOCATION/x" {
		t.Errorf("without an environment: %q %v, want the name as written", got, err)
	}
}
