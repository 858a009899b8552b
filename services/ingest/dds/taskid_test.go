package dds

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// bitwiseCRC is the definition of boost::crc_optimal<64, 0x04C11DB7, 0, 0, false, false>
// one bit at a time: each message bit, most significant first, enters at the top of the
// register; when the bit leaving the top differs from it, the polynomial is XORed in.
func bitwiseCRC(s string) uint64 {
	var c uint64
	for i := 0; i < len(s); i++ {
		for k := 7; k >= 0; k-- {
			in := uint64(s[i]>>uint(k)) & 1
			top := c >> 63
			c <<= 1
			if top^in == 1 {
				c ^= 0x04C11DB7
			}
		}
	}
	return c
}

func TestCRC64CheckValue(t *testing.T) {
	// The check value of the parameter set (CRC of "123456789") as the bitwise
	// definition gives it; the table-driven crc64 must agree.
	want := bitwiseCRC("123456789")
	if want == 0 {
		t.Fatal("bitwise CRC of the check string is 0")
	}
	if got := crc64("123456789"); got != want {
		t.Fatalf("crc64(123456789) = %#x, the bitwise definition gives %#x", got, want)
	}
	for _, s := range []string{"", "a", "main/task1_0|Task|t|exe||1|1", string([]byte{0, 0xff, 0x80, 1})} {
		if crc64(s) != bitwiseCRC(s) {
			t.Errorf("crc64(%q) = %#x, want %#x", s, crc64(s), bitwiseCRC(s))
		}
	}
	// With init 0 and no final XOR the CRC is M(x)·x^64 mod P: 0 for the empty string,
	// and x^64 mod P, the polynomial's low 64 bits, for the single byte 0x01.
	if crc64("") != 0 || crc64("\x01") != 0x04C11DB7 {
		t.Fatalf("crc64 of '' = %#x, of \\x01 = %#x", crc64(""), crc64("\x01"))
	}
}

func TestHashString(t *testing.T) {
	tk := &task{name: "t1", rawExe: " app -x ", rawEnv: "", exeReachable: false, envReachable: true,
		properties: []events.DDSProperty{{Name: "zz", Access: "write", Scope: "global"},
			{Name: "aa", Access: "read", Scope: "collection"}},
		requirements: []events.DDSRequirement{{Name: "r1", Type: "hostname", Value: "node.*"}},
		triggers:     []events.DDSTrigger{{Name: "tr", Condition: "TaskCrashed", Action: "RestartTask", Arg: "3"}},
		assets:       []events.DDSAsset{{Name: "as", Type: "inline", Visibility: "task", Value: "big"}}}
	want := "|Task|t1| app -x ||0|1" +
		"|Property|aa||read|collection||" + "|Property|zz||write|global||" +
		"|Requirement|r1|node.*|hostname||" +
		"|Trigger|tr|RestartTask|TaskCrashed|3||" +
		"|Asset|as|inline|task||"
	if got := tk.hashString(); got != want {
		t.Fatalf("hashString\n got %q\nwant %q", got, want)
	}
	id := taskID("main/t1_0", want)
	if id != strconv.FormatUint(bitwiseCRC("main/t1_0"+want), 10) {
		t.Fatalf("taskID %s", id)
	}
}

// suffixCRC gives crc64(p + suffix) for paths and suffixes of every length, as taskID does.
func TestSuffixCRC(t *testing.T) {
	for _, suffix := range []string{"", "x", "|Task|t|/bin/sleep 1||1|1", strings.Repeat("|Property|p||read|global||", 40)} {
		x := newSuffixCRC(suffix)
		for _, p := range []string{"", "a", "main/task1_0", "main/group1/collection1_3/task2_17", string([]byte{0xff, 0, 0x80})} {
			if got, want := x.of(p), crc64(p+suffix); got != want {
				t.Errorf("of(%q) with suffix %q = %#x, crc64 says %#x", p, suffix, got, want)
			}
			if strconv.FormatUint(x.of(p), 10) != taskID(p, suffix) {
				t.Errorf("task ID of %q differs", p)
			}
		}
	}
}

// Past suffixCRCFrom instances of a task, the expander's task IDs are still taskID's.
func TestManyInstancesKeepTheirTaskIDs(t *testing.T) {
	root, err := xmltree.Parse([]byte(`<topology name="t">
  <decltask name="a"><exe>/bin/a %taskIndex%</exe></decltask>
  <declcollection name="c"><tasks><name n="2">a</name></tasks></declcollection>
  <main name="main"><group name="g" n="150"><task>a</task><collection>c</collection></group></main>
</topology>`))
	if err != nil {
		t.Fatal(err)
	}
	topo, problems := Prepare(root)
	if problems != nil {
		t.Fatal(problems)
	}
	n := 0
	if err := topo.Each(func(j *events.Job) error {
		if j.DDS.TaskPath != "" {
			n++
			if want := taskID(j.DDS.TaskPath, topo.t.tasks["a"].hash); j.DDS.TaskID != want {
				t.Fatalf("%s: task ID %s, want %s", j.DDS.TaskPath, j.DDS.TaskID, want)
			}
		}
		return nil
	}); err != nil || n != 450 {
		t.Fatalf("%d instances, %v", n, err)
	}
}
