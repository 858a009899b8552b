package dds

import (
	"strconv"
	"testing"

	"github.com/gridwire/gridwire/events"
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
