package events

import (
	"fmt"
	"testing"
)

// Subject and JobFilter are SubjectEventT and SubjectJobT filled by concatenation: the
// same strings Sprintf writes from the templates, for every name and route.
func TestSubjectMatchesTemplates(t *testing.T) {
	for _, id := range []string{"01JABCDEFGHJKMNPQRSTVWXYZ0", "J1", ""} {
		if got, want := JobFilter(id), fmt.Sprintf(SubjectJobT, id); got != want {
			t.Errorf("JobFilter(%q) = %q, want %q", id, got, want)
		}
		for _, name := range names {
			for _, route := range []string{"", "hpc1", RouteGroup, NoRoute} {
				want := route
				if want == "" {
					want = NoRoute
				}
				if got, want := Subject(id, name, route), fmt.Sprintf(SubjectEventT, id, name, want); got != want {
					t.Errorf("Subject(%q, %s, %q) = %q, want %q", id, name, route, got, want)
				}
			}
		}
	}
}
