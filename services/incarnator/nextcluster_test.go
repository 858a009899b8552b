package incarnator

import (
	"errors"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// When the first matching cluster's profile cannot render the job (a value outside its
// limits), the next matching cluster is tried; when none can, every cluster's reason
// is reported.
func TestRenderingFailureTriesTheNextCluster(t *testing.T) {
	big := strings.NewReplacer(`name="site"`, `name="big"`, "<idb:Max>64</idb:Max>", "<idb:Max>128</idb:Max>").Replace(fieldsProfile)
	set := testSet(t, map[string]string{"site.xml": fieldsProfile, "big.xml": big})
	second := siteCluster()
	second.Name, second.Profile = "site-big", "big"
	p := mustPlanner(t, set, siteCluster(), second)
	app := &events.Application{Name: "Run"}
	inc, err := p.Plan(events.Job{ID: "01NEXT", Executable: "x", Application: app, Fields: map[string]string{"THREADS": "100"}})
	if err != nil || inc.Cluster != "site-big" {
		t.Fatalf("got cluster %q, %v; want site-big", inc.Cluster, err)
	}
	_, err = p.Plan(events.Job{ID: "01NONE", Executable: "x", Application: app, Fields: map[string]string{"THREADS": "200"}})
	var nm *NoMatchError
	if !errors.Is(err, ErrRejected) || !errors.As(err, &nm) || len(nm.Excluded) != 2 {
		t.Fatalf("got %v; want a rejection naming both clusters", err)
	}
	for _, want := range []string{`site: matches, but rendering failed: rendering application run: template RUN: field THREADS: value "200" is out of range (limits 1..64)`,
		`site-big: matches, but rendering failed: rendering application run: template RUN: field THREADS: value "200" is out of range (limits 1..128)`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
}
