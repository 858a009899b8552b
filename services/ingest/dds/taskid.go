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
