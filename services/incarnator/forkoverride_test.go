package incarnator

import (
	"strings"
	"testing"

	"github.com/gridwire/gridwire/pkg/cluster"
)

// A profile that overrides START or GET_JOB_STATUS cannot work on a local fork cluster,
// which starts and watches job processes itself: the planner refuses it there, naming
// the template and where it is written; the same profile is taken on an ssh cluster.
func TestForkClusterRefusesStartAndStatusOverrides(t *testing.T) {
	fields := map[string]string{
		"START": `<idb:Field name="NATIVE_ID_PATTERN" isSettable="false"><idb:Value>^([0-9]+)$</idb:Value></idb:Field>`,
		"GET_JOB_STATUS": `<idb:Field name="STATUS_PATTERN" isSettable="false"><idb:Value>^(?&lt;id&gt;[0-9]+) (?&lt;state&gt;[A-Z]+)$</idb:Value></idb:Field>
    <idb:Field name="STATE" isSettable="false"><idb:Tag name="R">RUNNING</idb:Tag></idb:Field>
    <idb:Field name="ABSENT_STATE" isSettable="false"><idb:Value>ENDED</idb:Value></idb:Field>`,
	}
	for _, tmpl := range []string{"START", "GET_JOB_STATUS"} {
		xml := `<?xml version="1.0"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns:idb="http://gpe.intel.com/idb" name="mine" extends="fork">
  <idb:Template name="` + tmpl + `">
    <idb:Invocation name=""><idb:Body><![CDATA[echo mine]]></idb:Body></idb:Invocation>` + fields[tmpl] + `
  </idb:Template>
</osp:Profile>`
		set := testSet(t, map[string]string{"mine.xml": xml})
		cl := forkCluster(t.TempDir())
		cl.Profile = "mine"
		_, err := NewPlanner(cluster.Config{Clusters: []cluster.Cluster{cl}}, set, "")
		if err == nil || !strings.Contains(err.Error(), "cluster local:") || !strings.Contains(err.Error(), "mine.xml:3:") ||
			!strings.Contains(err.Error(), "template "+tmpl+" differs from the fork profile's, and a fork cluster never runs it") {
			t.Errorf("%s override on a fork cluster: %v", tmpl, err)
		}
		ssh := cluster.Cluster{Name: "remote", Kind: cluster.KindSSH, Profile: "mine", LRMS: "Fork", Hosts: []string{"h:22"}, User: "grid", WorkRoot: "/w"}
		if _, err := NewPlanner(cluster.Config{Clusters: []cluster.Cluster{ssh}}, set, ""); err != nil {
			t.Errorf("%s override on an ssh cluster: %v", tmpl, err)
		}
	}
	if _, err := NewPlanner(cluster.Config{Clusters: []cluster.Cluster{forkCluster(t.TempDir())}}, testSet(t, nil), ""); err != nil {
		t.Errorf("the fork profile itself: %v", err)
	}
}
