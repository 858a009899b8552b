package events

// validJSON reports whether b is one JSON value, as json.Valid judges it: the same
// grammar (RFC 8259: any byte from 0x20 up inside a string, UTF-8 or not; \u escapes of
// four hex digits), whitespace around the value, and at most 10,000 nested objects and
// arrays. It is several times faster than json.Valid, which runs encoding/json's scanner
// a byte at a time through a function call; Encode checks every event's data with it.
// FuzzValidJSON holds it to json.Valid.
func validJSON(b []byte) bool {
	end, ok := JSONValueEnd(b, skipSpace(b, 0))
	return ok && skipSpace(b, end) == len(b)
}

// JSONValueEnd checks the one JSON value starting at b[i] (no whitespace before it) by
// validJSON's grammar and returns the index just after it; false when b[i:] does not
// start with a valid value. Readers that pick fields out of a payload without decoding
// it whole (the read side's projection) skip the values they do not keep with it.
func JSONValueEnd(b []byte, i int) (int, bool) {
	const maxDepth = 10000 // encoding/json's maxNestingDepth
	var buf [64]byte
	stack := buf[:0] // the open containers, '{' or '['
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return i, false
		}
		ok := true
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxDepth {
				return i, false
			}
			stack = append(stack, c)
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i, ok = objectKey(b, i); !ok {
					return i, false
				}
			}
			continue
		case c == '"':
			i, ok = endOfString(b, i)
		case c == '-' || c >= '0' && c <= '9':
			i, ok = endOfNumber(b, i)
		case c == 't':
			i, ok = literal(b, i, "true")
		case c == 'f':
			i, ok = literal(b, i, "false")
		case c == 'n':
			i, ok = literal(b, i, "null")
		default:
			return i, false
		}
		if !ok {
			return i, false
		}
		// After a value: the end, a comma and the next member, or closing brackets.
		for {
			if len(stack) == 0 {
				return i, true
			}
			if i = skipSpace(b, i); i >= len(b) {
				return i, false
			}
			top := stack[len(stack)-1]
			if b[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return i, false
			}
			i = skipSpace(b, i+1)
			if top == '{' {
				if i, ok = objectKey(b, i); !ok {
					return i, false
				}
			}
			break
		}
	}
}

// JSONStringEnd checks the JSON string starting with the quote at b[i] and returns the
// index just after its closing quote; b[i+1:end-1] is the string as written, escapes
// and all.
func JSONStringEnd(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	return endOfString(b, i)
}

// objectKey reads a member's name and its colon at b[i]; it returns where the value starts.
func objectKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := endOfString(b, i)
	if !ok {
		return i, false
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return skipSpace(b, i+1), true
}

// plainInString marks the bytes a JSON string holds as they are: all from 0x20 up but
// the quote and the backslash.
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// endOfString returns the index after the string starting with the quote at b[i]. It
// jumps from one quote, backslash or control character to the next, eight bytes at a
// time (firstSpecial): the large payloads (a job's description, the rendered scripts)
// are mostly long strings, and every event's data is checked by it when it is encoded
// and again when it is decoded.
func endOfString(b []byte, i int) (int, bool) {
	for i++; ; {
		i = firstSpecial(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
			i++
		default: // a control character
			return i, false
		}
	}
}

// endOfNumber returns the index after the number starting at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func endOfNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func literal(b []byte, i int, word string) (int, bool) {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}
