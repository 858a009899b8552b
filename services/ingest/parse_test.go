package ingest

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

func mustRead(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDDSInstanceCounts states how many task instances DDS starts for the corpus
// topologies and the spec's example, and checks their runtime paths.
func TestDDSInstanceCounts(t *testing.T) {
	cases := []struct {
		file      string
		instances int
		paths     []string
	}{
		// main: TaskTypeTwo once, group typeTwoGroup n=${nInstances}=5 of TaskTypeOne.
		{"testdata/dds/corpus_tutorial1_topo.xml", 6, []string{"main/TaskTypeTwo_0",
			"main/typeTwoGroup/TaskTypeOne_0", "main/typeTwoGroup/TaskTypeOne_1", "main/typeTwoGroup/TaskTypeOne_2",
			"main/typeTwoGroup/TaskTypeOne_3", "main/typeTwoGroup/TaskTypeOne_4"}},
		// group GroupCustomCmd n=5 of TaskCustomCmd.
		{"testdata/dds/corpus_tutorial2_topo.xml", 5, []string{"main/GroupCustomCmd/TaskCustomCmd_0",
			"main/GroupCustomCmd/TaskCustomCmd_1", "main/GroupCustomCmd/TaskCustomCmd_2",
			"main/GroupCustomCmd/TaskCustomCmd_3", "main/GroupCustomCmd/TaskCustomCmd_4"}},
		// task1 + collection1 (3) + 10 x (task1 + collection1 (3) + collection2 (2)) + 15 x collection1 (3).
		{"testdata/dds/spec_example.xml", 1 + 3 + 10*6 + 15*3, nil},
	}
	for _, c := range cases {
		jobs, err := Parse(c.file, mustRead(t, c.file), ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if jobs[0].Kind != events.KindGroup || len(jobs)-1 != c.instances {
			t.Fatalf("%s: %d instances (parent kind %q), want %d", c.file, len(jobs)-1, jobs[0].Kind, c.instances)
		}
		for i, want := range c.paths {
			if got := jobs[i+1].DDS.TaskPath; got != want {
				t.Errorf("%s: instance %d path %q, want %q", c.file, i, got, want)
			}
		}
	}
}

func TestDDSTutorial1Instance(t *testing.T) {
	jobs, err := Parse("t1.xml", mustRead(t, "testdata/dds/corpus_tutorial1_topo.xml"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[4] // main/typeTwoGroup/TaskTypeOne_2
	// The exe is not reachable: the stager delivers it and bash runs the copy, as DDS's
	// agent runs its copy in the slot directory.
	wantArgs := []string{"-c", "chmod u+x ./task-type-one\n./task-type-one --taskIndex 2"}
	if j.Executable != "/bin/bash" || !reflect.DeepEqual(j.Arguments, wantArgs) {
		t.Fatalf("exe %q args %q", j.Executable, j.Arguments)
	}
	if len(j.StageIn) != 1 || j.StageIn[0] != (events.FileCopy{From: "$DDS_LOCATION/tutorials/tutorial1/task-type-one", To: "task-type-one"}) {
		t.Fatalf("stage-in %+v, want the exe delivered", j.StageIn)
	}
	if j.DDS.ExeReachable || j.DDS.GroupName != "typeTwoGroup" || j.DDS.CollectionIndex != -1 {
		t.Fatalf("context %+v", j.DDS)
	}
	two := jobs[1]
	if !reflect.DeepEqual(two.Arguments, []string{"-c", "chmod u+x ./task-type-two\n./task-type-two --instances 5"}) {
		t.Fatalf("${nInstances} not replaced: %q", two.Arguments)
	}
	env := map[string]string{}
	for _, e := range j.Environment {
		env[e.Name] = e.Value
	}
	// DDS's ID: crc64 of the task path and CTopoTask::hashString, written out here from
	// the file (exe untrimmed, no env, reachable 0/1, properties in name order).
	hash := "|Task|TaskTypeOne|$DDS_LOCATION/tutorials/tutorial1/task-type-one --taskIndex %taskIndex%||0|1" +
		"|Property|ReplyProperty||read|global||" + "|Property|TaskIndexProperty||write|global||"
	id := strconv.FormatUint(ddsCRC("main/typeTwoGroup/TaskTypeOne_2"+hash), 10)
	want := map[string]string{"DDS_TASK_PATH": "main/typeTwoGroup/TaskTypeOne_2", "DDS_GROUP_NAME": "typeTwoGroup",
		"DDS_COLLECTION_NAME": "", "DDS_TASK_NAME": "TaskTypeOne", "DDS_TASK_INDEX": "2", "DDS_SESSION_ID": "{session}",
		"DDS_TASK_ID": id, "DDS_SLOT_ID": "3", "DDS_LOCATION": "{dds_location}"}
	if !reflect.DeepEqual(env, want) {
		t.Fatalf("env %v, want %v", env, want)
	}
	if j.DDS.TaskID != id {
		t.Fatalf("context task ID %q, want %q", j.DDS.TaskID, id)
	}
	var names []string
	for _, e := range j.Environment {
		names = append(names, e.Name)
	}
	wantNames := []string{"DDS_TASK_PATH", "DDS_GROUP_NAME", "DDS_COLLECTION_NAME", "DDS_TASK_NAME", "DDS_TASK_INDEX",
		"DDS_SESSION_ID", "DDS_TASK_ID", "DDS_SLOT_ID", "DDS_LOCATION"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("env order %v, want %v", names, wantNames)
	}
}

// ddsCRC is boost::crc_optimal<64, 0x04C11DB7, 0, 0, false, false> bit by bit.
func ddsCRC(s string) uint64 {
	var c uint64
	for i := 0; i < len(s); i++ {
		for k := 7; k >= 0; k-- {
			top := c>>63 ^ uint64(s[i]>>uint(k))&1
			c <<= 1
			if top == 1 {
				c ^= 0x04C11DB7
			}
		}
	}
	return c
}

// TestDDSAcceptsWhatDDSAccepts: a property listed twice in a task is kept once, with
// the first listing's access, as CTopoTask::addProperty's std::map insert keeps it; a
// bad access tag on the second listing is still refused.
func TestDDSAcceptsWhatDDSAccepts(t *testing.T) {
	topo := `<topology name="t">
<property name="p"/>
<decltask name="a"><exe>/bin/true</exe><properties><name access="read">p</name><name access="write">p</name></properties></decltask>
<main name="main"><task>a</task></main>
</topology>`
	jobs, err := Parse("t.xml", []byte(topo), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := jobs[1].DDS.Properties
	if len(got) != 1 || got[0].Name != "p" || got[0].Access != "read" {
		t.Fatalf("properties %+v, want p once with access read", got)
	}
	bad := strings.Replace(topo, `access="write"`, `access="sometimes"`, 1)
	if _, err := Parse("t.xml", []byte(bad), ParseOptions{}); err == nil || !strings.Contains(err.Error(), "t.xml:3:") || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("bad access on the second listing: %v", err)
	}
}

// TestV3SpecStagingTable checks the spec's staging table once task 117's ID is filled in.
func TestV3SpecStagingTable(t *testing.T) {
	jobs, err := Parse("files.json", mustRead(t, "testdata/v3/spec_files.json"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[0].Substitute(map[string]string{"taskid": "117", "queue": "q", "lrms": "PBS"})
	in := []events.FileCopy{
		{From: "gsiftp://example.org/my/files/hello.txt", To: "hello.txt"},
		{From: "gsiftp://example.org/bar.txt", To: "foo.txt"},
		{From: "gsiftp://example.org/my/directory/qux/", To: "qux", Directory: true},
	}
	out := []events.FileCopy{{From: "qux/test.txt", To: "gsiftp://example.org/my/output/117/test.txt"}}
	if !reflect.DeepEqual(j.StageIn, in) || !reflect.DeepEqual(j.StageOut, out) {
		t.Fatalf("in %+v\nout %+v", j.StageIn, j.StageOut)
	}
}

func TestDetect(t *testing.T) {
	cases := []struct {
		data, contentType, want string
	}{
		{`{"version":3}`, "", FormatV3JSON},
		{` [1]`, "", FormatV3JSON},
		{"version: 3\nexecutable: x\n", "", FormatV3YAML},
		{"executable: x\n", "text/plain", FormatV3YAML},
		{"version: 3\n", "application/json", FormatV3JSON},
		{`{"version": 3}`, "application/yaml; charset=utf-8", FormatV3YAML},
		{`{"version": 3}`, "application/x-yaml", FormatV3YAML},
		{`{}`, "application/vnd.example+json", FormatV3JSON},
		{"<?xml version='1.0'?>\n<!-- c -->\n<jrdl/>", "", FormatJRDL},
		{"\xef\xbb\xbf<topology name='x'/>", "", FormatDDS},
		{"<x:topology xmlns:x='urn:x'/>", "application/xml", FormatDDS},
		{"<topology/>", "text/xml", FormatDDS},
		{"key: [unclosed\n", "", FormatV3YAML}, // broken YAML: its reader reports where
	}
	for _, c := range cases {
		got, err := Detect([]byte(c.data), c.contentType)
		if err != nil || got != c.want {
			t.Errorf("Detect(%q, %q) = %q, %v; want %q", c.data, c.contentType, got, err, c.want)
		}
	}
	for _, bad := range []struct{ data, contentType, want string }{
		{"", "", "the document is empty"},
		{"<html/>", "", "XML root element <html> is neither <jrdl>, <topology> nor <JobDefinition> (JSDL)"},
		{"name: x\n", "", "YAML without any key of a v3 task description"},
		{"just words", "", "YAML without any key"},
		{"<jrdl", "application/xml", "XML without a readable root element"},
	} {
		_, err := Detect([]byte(bad.data), bad.contentType)
		if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Detect(%q) error %v, want it to say %q", bad.data, err, bad.want)
		}
	}
}

func TestForcedFormat(t *testing.T) {
	yaml := []byte("version: 3\nexecutable: /bin/true\n")
	if _, err := Parse("a", yaml, ParseOptions{Format: FormatV3YAML, ContentType: "application/json"}); err != nil {
		t.Fatalf("forced YAML: %v", err)
	}
	_, err := Parse("a", yaml, ParseOptions{Format: FormatV3JSON})
	if err == nil || err.Error() != `a:1:1: (syntax): unexpected 'v', expected a value` {
		t.Fatalf("YAML forced as JSON: %v", err)
	}
	_, err = Parse("a", yaml, ParseOptions{Format: "rsl"})
	if err == nil || err.Error() != `a:1:1: (format): unknown format "rsl" (one of v3-json, v3-yaml, jrdl, dds, jsdl, ptp-submit)` {
		t.Fatalf("unknown format: %v", err)
	}
}

func TestHostileInput(t *testing.T) {
	cases := []struct {
		name, format string
		data         []byte
		want         string
	}{
		{"big", "", make([]byte, MaxDocumentBytes+1), "(document): is 16777217 bytes, more than the limit of 16777216"},
		{"deep.json", "", []byte(strings.Repeat("[", 100000)), "(syntax): nested deeper than 64 levels"},
		{"wide.json", "", []byte("[" + strings.Repeat("1,", MaxTaskDescriptionBytes/2) + "1]"), "(document): is 1048579 bytes; a v3 task description may have at most 1048576"},
		{"wide.xml", FormatDDS, []byte("<topology>" + strings.Repeat("<a/>", xmltree.MaxElements) + "</topology>"), "(syntax): more than 500000 elements"},
		{"deep.yaml", FormatV3YAML, []byte(strings.Repeat("- ", 100) + "x\n"), "nested deeper than"},
		{"deep.xml", FormatJRDL, []byte(strings.Repeat("<a>", 100000)), "(syntax): elements nested deeper than 64 levels"},
		{"doctype.xml", "", []byte(`<!DOCTYPE jrdl SYSTEM "file:///etc/passwd"><jrdl/>`), "<!DOCTYPE is not accepted"},
		{"entity.xml", FormatJRDL, []byte(`<jrdl>&xxe;</jrdl>`), "(syntax): invalid character entity &xxe;"},
		{"alias.yaml", "", []byte("version: 3\nexecutable: x\narguments: &a [a]\nenvironment: *a\n"), "3:12: (syntax): YAML anchors are not accepted"},
		{"nul.json", "", []byte("{\"version\": 3, \"executable\": \"a\x00\"}"), "(syntax): control character in string"},
		{"utf8.json", "", []byte("{\"version\": 3, \"executable\": \"\xff\"}"), "(syntax): string is not valid UTF-8"},
	}
	for _, c := range cases {
		_, err := Parse(c.name, c.data, ParseOptions{Format: c.format})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

// TestDeterministic parses every valid golden input twice and compares the results.
func TestDeterministic(t *testing.T) {
	for _, name := range []string{"testdata/v3/all_attributes.yaml", "testdata/jrdl/all_attributes.xml", "testdata/dds/all_features.xml"} {
		data := mustRead(t, name)
		a, err := Parse(name, data, ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Parse(name, data, ParseOptions{})
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: two parses differ", name)
		}
	}
}

// A JRDL document of several jobs is named after its file (it has no name of its own);
// without a file it keeps the format's name, and a lone job is not renamed.
func TestJRDLDocumentNamedAfterItsFile(t *testing.T) {
	two := []byte(`<jrdl>
  <job><executable><path><stringElement value="/bin/true"/></path></executable></job>
  <job><executable><path><stringElement value="/bin/true"/></path></executable></job>
</jrdl>`)
	one := []byte(`<jrdl><job><executable><path><stringElement value="/bin/true"/></path></executable></job></jrdl>`)
	for _, c := range []struct {
		file string
		doc  []byte
		want string
	}{
		{"runs/nightly.xml", two, "nightly.xml"},
		{"(request body)", two, "jrdl"},
		{"<stdin>", two, "jrdl"},
		{"", two, "jrdl"},
		{"nightly.xml", one, ""},
	} {
		jobs, err := Parse(c.file, c.doc, ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if jobs[0].Name != c.want {
			t.Errorf("%q: the first job is named %q, want %q", c.file, jobs[0].Name, c.want)
		}
	}
}
