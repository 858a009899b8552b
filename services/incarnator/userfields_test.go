package incarnator

import (
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// A HOLD that names a field: job-independent unless some user profile sets the field.
const userFieldsProfile = `<?xml version="1.0"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns:idb="http://gpe.intel.com/idb" name="homes" extends="fork">
  <idb:Template name="HOLD">
    <idb:Invocation name=""><idb:Body><![CDATA[echo hold in <HOME_BASE>; kill -STOP -<NATIVE_ID>]]></idb:Body></idb:Invocation>
  </idb:Template>
</osp:Profile>
`

// User profile fields (GPE OS Profile 2.3.1) are the operator's values per submitter:
// they win over the cluster's fields, reach scripts raw (trusted), and make a script
// that uses them depend on the job's submitter instead of being rendered once.
func TestUserProfileFields(t *testing.T) {
	cl := forkCluster(t.TempDir())
	cl.Profile, cl.Fields = "homes", map[string]string{"HOME_BASE": "/home"}
	cfg := cluster.Config{Clusters: []cluster.Cluster{cl},
		Users: []cluster.UserProfile{{Principal: "alice", Fields: map[string]string{"HOME_BASE": "/data/$GROUP/alice"}}}}
	p, err := NewPlanner(cfg, testSet(t, map[string]string{"homes.xml": userFieldsProfile}), "")
	if err != nil {
		t.Fatal(err)
	}
	for submitter, want := range map[string]string{"alice": "hold in /data/$GROUP/alice;", "bob": "hold in /home;"} {
		inc, err := p.Plan(events.Job{ID: "01" + strings.ToUpper(submitter), Executable: "/bin/true", Submitter: submitter})
		if err != nil {
			t.Fatal(err)
		}
		if body := inc.Scripts[events.ScriptHold].Body; !strings.Contains(body, want) {
			t.Errorf("%s's HOLD:\n%s\nwant it to contain %q", submitter, body, want)
		}
	}
}
