package ingest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridwire/gridwire/events"
)

// ptpEcho is what PTP 5's client sends to launch /bin/echo hello (see pkg/ptpwire's
// testdata/java_commands.bin, written by PTP's own ProxyPacket), queue ID translated.
const ptpEcho = `["jobSubId=sub-1", "execName=echo", "execPath=/bin", "workingDir=/tmp", "progArgs=hello",
 "progArgs=", "env=A=1=2", "launchedByPTP=true", "jobNumProcs=1", "queueId=local/default"]`

// TestPTPSubmit reads the attribute list PTP 5's client sends for a launch (as its own
// ProxyPacket encodes it, see pkg/ptpwire's testdata) into a canonical job.
func TestPTPSubmit(t *testing.T) {
	data := []byte(ptpEcho)
	jobs, err := Parse("echo.json", data, ParseOptions{Format: FormatPTP})
	if err != nil {
		t.Fatal(err)
	}
	want := events.Job{Name: "echo", Executable: "/bin/echo", Arguments: []string{"hello", ""}, Directory: "/tmp",
		Environment: []events.EnvVar{{Name: "A", Value: "1=2"}}, Count: 1,
		Requirements: events.Requirements{Queue: "default", Origins: map[string]events.Origin{"queue": {Field: "queueId", Line: 2, Col: 67}}},
		Extra:        map[string]string{"jobSubId": "sub-1", "launchedByPTP": "true", "ptp.cluster": "local"}}
	if diff := cmp.Diff(want, jobs[0], cmpopts.IgnoreFields(events.Job{}, "Original")); diff != "" {
		t.Fatalf("job (-want +got):\n%s", diff)
	}
	mpi, err := Parse("mpi", []byte(`["jobSubId=s","execName=a.out","jobNumProcs=4","jobNumNodes=2","jobTimeLimit=30","jobPartition=batch"]`), ParseOptions{Format: FormatPTP})
	if err != nil {
		t.Fatal(err)
	}
	j := mpi[0]
	if !j.MPI || j.Count != 4 || j.Duration != 30*time.Minute || j.Requirements.Queue != "batch" || j.Fields["NODES"] != "2" {
		t.Fatalf("batch attributes not applied: %+v", j)
	}
}

func TestPTPSubmitRejects(t *testing.T) {
	cases := map[string]string{
		`{"execName":"x"}`:  "echo.json:1:1: (document): must be a list",
		`["execName=echo"]`: "echo.json:1:1: jobSubId: missing",
		`["jobSubId=1","execName=echo","jobNumProcs=two"]`: "echo.json:1:31: jobNumProcs: \"two\" is not a positive integer",
		`["jobSubId=1","execName=echo","env=1A=b"]`:        "echo.json:1:31: env: \"1A=b\" is not NAME=VALUE",
		`["jobSubId=1","execName=echo","execName=cat"]`:    "echo.json:1:31: execName: given twice",
		`["jobSubId=1","execName=echo","debug=true"]`:      "echo.json:1:31: debug: a debug launch",
		`["jobSubId=1","execName=echo",7]`:                 "echo.json:1:31: (attribute): must be a \"key=value\" string",
		`["jobSubId=1","execName=echo","queueId=a b/q"]`:   "echo.json:1:31: queueId: \"a b/q\" is not \"cluster/queue\"",
	}
	for in, want := range cases {
		_, err := Parse("echo.json", []byte(in), ParseOptions{Format: FormatPTP})
		if !errors.Is(err, ErrInvalid) || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Errorf("%s:\n got %v\nwant %s...", in, err, want)
		}
	}
}

func FuzzParsePTP(f *testing.F) {
	f.Add([]byte(ptpEcho))
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, FormatPTP, data) })
}
