package events

import (
	"encoding/json"
	"strings"
	"testing"
)

var validJSONCases = []string{
	``, ` `, `{}`, ` [ ] `, `{"a":1}`, `{"a":1,}`, `{,}`, `[1,]`, `[,1]`, `{"a" : [true,false,null] , "b":{"c":"d"}}`,
	`{"a"}`, `{"a":}`, `{1:2}`, `[1 2]`, `"x"`, `"x`, `"\"\\\/\b\f\n\r\t\u00e9\uD800"`, `"\u00g0"`, `"\u12"`, `"\x"`,
	"\"a\tb\"", "\"\xff\xfe\"", "\"\u2028\"", `0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-`, `1e`,
	`-1.25e-10`, `tru`, `true`, `truee`, `nul`, `null `, `false1`, `[]]`, `[[]`, `{}}`, `{"a":1}{}`, "\t\r\n{}\n",
	"[\v]", `{"a":"b"`, `[`, `"\`, `{"\u0041":"\uffff"}`, `[-]`, `[+1]`, `[1.e1]`, `[0x1]`, `[Infinity]`, "\x00",
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

// validJSON judges every case as json.Valid does.
func TestValidJSONIsJSONValid(t *testing.T) {
	for _, c := range validJSONCases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%.60q) = %v, json.Valid says %v", c, got, want)
		}
	}
}

// FuzzValidJSON: on any bytes, validJSON and json.Valid agree.
func FuzzValidJSON(f *testing.F) {
	for _, c := range validJSONCases {
		if len(c) < 200 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

// Every prefix of a job's JSON, and the JSON with any one byte changed to a byte the
// grammar cares about, is judged as json.Valid judges it.
func TestValidJSONOnAJobCutAndChanged(t *testing.T) {
	b, err := json.Marshal(Job{ID: "J", Name: "caf\u00e9 <x> and a name long enough for eight bytes at a time", Arguments: []string{"a\"b", "\\", "\t"}, Count: -12, Duration: 15e9,
		Environment: []EnvVar{{Name: "A", Value: "1e5"}}, DDS: &DDSContext{CollectionIndex: -1, Vars: map[string]string{"n": "0.5"}},
		Fields: map[string]string{}, Restarts: 3})
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(b) + 1 {
		if validJSON(b[:n]) != json.Valid(b[:n]) {
			t.Fatalf("differ on the prefix %q", b[:n])
		}
	}
	c := make([]byte, len(b))
	for i := range b {
		for _, x := range []byte("\"\\{}[]:,0-.eEtu \x00\x1f\x20\x7f\x80\xff") {
			copy(c, b)
			c[i] = x
			if validJSON(c) != json.Valid(c) {
				t.Fatalf("differ on %q", c)
			}
		}
	}
}

// firstSpecial finds the first quote, backslash or control character as a byte-at-a-time
// scan does, wherever it sits in a word, after any bytes (the borrows of the word's test
// run upward from a special byte, so a special byte below another must win), and for
// every start and length around a word's edges.
func TestFirstSpecialIsTheFirstSpecialByte(t *testing.T) {
	slow := func(b []byte, i int) int {
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
			i++
		}
		return i
	}
	fills := []byte{'a', ' ', 0x7f, 0x80, 0xa0, 0xff, '!', '#', '[', ']', 0x21, 0x5b, 0x5d}
	specials := []byte{'"', '\\', 0x00, 0x01, 0x1f, '\n'}
	for n := 0; n <= 19; n++ {
		for _, fill := range fills {
			b := []byte(strings.Repeat(string([]byte{fill}), n))
			for i := 0; i <= n; i++ {
				if got, want := firstSpecial(b, i), slow(b, i); got != want {
					t.Fatalf("firstSpecial(%q, %d) = %d, want %d", b, i, got, want)
				}
			}
			for p := 0; p < n; p++ {
				for _, s1 := range specials {
					for q := p; q < n; q++ {
						for _, s2 := range append(specials, fill) {
							c := append([]byte(nil), b...)
							c[q], c[p] = s2, s1
							for _, i := range []int{0, 1, p} {
								if got, want := firstSpecial(c, i), slow(c, i); got != want {
									t.Fatalf("firstSpecial(%q, %d) = %d, want %d", c, i, got, want)
								}
							}
						}
					}
				}
			}
		}
	}
}

// scanString sends a string with a byte that is not UTF-8 to the slow path wherever the
// byte sits in its word, the closing quote in the same word or a later one, and keeps
// valid UTF-8 (the ASCII test gathers every byte before the quote, none after it).
func TestScanStringChecksUTF8WhereverItSits(t *testing.T) {
	for n := 1; n <= 20; n++ {
		for p := 0; p < n; p++ {
			for _, c := range []struct {
				bad  string
				fail bool
			}{{"\xff", true}, {"\xc3", true}, {"\xc3\xa9", false}} {
				s := []byte(strings.Repeat("a", p) + c.bad + strings.Repeat("b", n-p))
				body := append(append([]byte{'"'}, s...), []byte("\"\xff\xff\xff\xff\xff\xff\xff\xff")...)
				val, end, err := scanString(body, 0)
				if c.fail != (err != nil) {
					t.Fatalf("scanString(%q): err %v, want failure %v", body, err, c.fail)
				}
				if err == nil && (string(val) != string(s) || end != len(s)+2) {
					t.Fatalf("scanString(%q) = %q, %d", body, val, end)
				}
			}
		}
	}
}
