package dds

import (
	"strconv"
	"strings"
)

// ddsPoly is the generator DDS's task IDs use: boost::crc_optimal<64, 0x04C11DB7, 0, 0,
// false, false> (dds-misc-lib CRC.h), the CRC-32 polynomial taken as a 64-bit one, fed
// most significant bit first, initial value 0, no reflection, no final XOR.
const ddsPoly uint64 = 0x04C11DB7

var crcTable = func() (t [256]uint64) {
	for i := range t {
		c := uint64(i) << 56
		for k := 0; k < 8; k++ {
			if c&(1<<63) != 0 {
				c = c<<1 ^ ddsPoly
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// crc64 is dds::misc::crc64.
func crc64(s string) uint64 {
	var c uint64
	for i := 0; i < len(s); i++ {
		c = crcTable[byte(c>>56)^s[i]] ^ c<<8
	}
	return c
}

// taskID is DDS's ID of a task instance (CTopoCore::FillIdToTopoElementMap): the CRC of
// its runtime path (path_index, DDS_TASK_PATH) followed by its task's hash string,
// printed as an unsigned decimal.
func taskID(taskPath, hash string) string {
	return strconv.FormatUint(crc64(taskPath+hash), 10)
}

// suffixCRC computes crc64(p + suffix) for a fixed suffix from p alone. This CRC (no
// initial value, no final XOR) is linear: crc64(p+s) = z(crc64(p)) ^ crc64(s), where z
// runs the register over len(s) zero bytes, itself linear, so it is the XOR of its
// values on the register's bits, kept a nibble at a time. A task's hash string is a
// few hundred bytes and its instances' paths a few dozen: a million instances ran the
// CRC over the hash a million times.
type suffixCRC struct {
	zeros  [16][16]uint64 // zeros[k][v]: z of the register holding v in its k-th nibble
	suffix uint64         // crc64(suffix)
}

func newSuffixCRC(suffix string) *suffixCRC {
	x := &suffixCRC{suffix: crc64(suffix)}
	var bits [64]uint64 // z of each bit of the register
	for i := range bits {
		c := uint64(1) << i
		for range len(suffix) {
			c = crcTable[byte(c>>56)] ^ c<<8
		}
		bits[i] = c
	}
	for k := range 16 {
		for v := 1; v < 16; v++ {
			low := v & -v // the lowest bit of v
			x.zeros[k][v] = x.zeros[k][v&^low] ^ bits[4*k+bitIndex(low)]
		}
	}
	return x
}

func bitIndex(b int) int {
	i := 0
	for b > 1 {
		b >>= 1
		i++
	}
	return i
}

// of is crc64(p + suffix).
func (x *suffixCRC) of(p string) uint64 {
	c := crc64(p)
	z := x.suffix
	for k := range 16 {
		z ^= x.zeros[k][(c>>(4*k))&0xf]
	}
	return z
}

// hashString is CTopoTask::hashString: the task's exe and env as written (after ${var}
// replacement, untrimmed: DDS reads the topology without trim_whitespace), the
// reachability flags as a C++ stream prints bools, then its properties in name order
// (a std::map), requirements, triggers and assets in listing order, each followed by "|".
func (tk *task) hashString() string {
	var b strings.Builder
	b.WriteString("|Task|" + tk.name + "|" + tk.rawExe + "|" + tk.rawEnv + "|" + bit(tk.exeReachable) + "|" + bit(tk.envReachable))
	props := make([]int, len(tk.properties))
	for i := range props {
		props[i] = i
	}
	sortByName(props, func(i int) string { return tk.properties[i].Name })
	for _, i := range props {
		p := tk.properties[i]
		// A property has no value in the topology (DDS sets it at run time).
		b.WriteString("|Property|" + p.Name + "||" + p.Access + "|" + p.Scope + "||")
	}
	for _, r := range tk.requirements {
		b.WriteString("|Requirement|" + r.Name + "|" + r.Value + "|" + r.Type + "||")
	}
	for _, tr := range tk.triggers {
		b.WriteString("|Trigger|" + tr.Name + "|" + tr.Action + "|" + tr.Condition + "|" + tr.Arg + "||")
	}
	for _, a := range tk.assets {
		// DDS leaves an asset's value out of the hash (GH-454).
		b.WriteString("|Asset|" + a.Name + "|" + a.Type + "|" + a.Visibility + "||")
	}
	return b.String()
}

func bit(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// sortByName orders indices by the byte order of their names, as std::map<std::string>
// does.
func sortByName(idx []int, name func(int) string) {
	for i := 1; i < len(idx); i++ {
		for j := i; j > 0 && name(idx[j]) < name(idx[j-1]); j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
}
