package ptpwire

import (
	"fmt"
)

// Sizes of the text form's fixed-width hex fields.
const (
	textLenDigits  = 8 // frame length
	textIDDigits   = 4 // command or event ID
	textTIDDigits  = 8
	textNDigits    = 8 // argument count
	textArgDigits  = 8 // argument length
	textHeaderSize = 1 + textIDDigits + 1 + textTIDDigits + 1 + textNDigits
	maxTextID      = 0xFFFF
)

const hexDigits = "0123456789ABCDEF"

func appendHex(dst []byte, v uint64, digits int) []byte {
	for i := digits - 1; i >= 0; i-- {
		dst = append(dst, hexDigits[(v>>(4*uint(i)))&0xF])
	}
	return dst
}

// AppendText appends one text frame: "LLLLLLLL IIII:TTTTTTTT:NNNNNNNN" then, for each
// argument, " LLLLLLLL:characters". The frame length counts everything after the length
// field, including the space that opens the message.
func AppendText(dst []byte, m Message) ([]byte, error) {
	if m.ID < 0 || m.ID > maxTextID || len(m.Args) > MaxArgs {
		return dst, fmt.Errorf("%w: id %d, %d args", ErrEncode, m.ID, len(m.Args))
	}
	start := len(dst)
	dst = append(dst, "00000000 "...)
	dst = appendHex(dst, uint64(m.ID), textIDDigits)
	dst = append(dst, ':')
	dst = appendHex(dst, uint64(m.TID), textTIDDigits)
	dst = append(dst, ':')
	dst = appendHex(dst, uint64(len(m.Args)), textNDigits)
	for i, a := range m.Args {
		if !isASCII(a) || uint64(len(a)) > 0xFFFFFFFF {
			return dst[:start], fmt.Errorf("%w: argument %d is not ASCII", ErrEncode, i)
		}
		dst = append(dst, ' ')
		dst = appendHex(dst, uint64(len(a)), textArgDigits)
		dst = append(dst, ':')
		dst = append(dst, a...)
	}
	n := len(dst) - start - textLenDigits
	appendHex(dst[start:start], uint64(n), textLenDigits)
	return dst, nil
}

func hexValue(b []byte) (uint64, bool) {
	var v uint64
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, true
}

func isHexDigit(c byte) bool {
	_, ok := hexValue([]byte{c})
	return ok
}

func textErr(field, reason string, err error) *FrameError {
	return &FrameError{Format: FormatText, Field: field, Reason: reason, Err: err, Resync: true}
}

// parseTextMessage reads the message part of a text frame (everything after the length).
func parseTextMessage(p []byte) (Message, *FrameError) {
	var m Message
	if len(p) < textHeaderSize {
		return m, textErr("header", fmt.Sprintf("%d bytes, need %d", len(p), textHeaderSize), ErrTruncated)
	}
	if !isASCII(string(p)) {
		return m, textErr("message", "not US-ASCII", ErrNonASCII)
	}
	if p[0] != ' ' || p[1+textIDDigits] != ':' || p[2+textIDDigits+textTIDDigits] != ':' {
		return m, textErr("header", fmt.Sprintf("%q is not \" IIII:TTTTTTTT:NNNNNNNN\"", p[:textHeaderSize]), ErrMalformed)
	}
	id, ok1 := hexValue(p[1 : 1+textIDDigits])
	tid, ok2 := hexValue(p[2+textIDDigits : 2+textIDDigits+textTIDDigits])
	if !ok1 || !ok2 {
		return m, textErr("header", fmt.Sprintf("%q: ID or TID is not hex", p[:textHeaderSize]), ErrMalformed)
	}
	m.ID, m.TID = int(id), uint32(tid)
	nargs, ok := hexValue(p[3+textIDDigits+textTIDDigits : textHeaderSize])
	if !ok {
		return m, tidText(m.TID, "nargs", "not hex", ErrMalformed)
	}
	p = p[textHeaderSize:]
	if nargs > MaxArgs || nargs*(2+textArgDigits) > uint64(len(p)) {
		return m, tidText(m.TID, "nargs", fmt.Sprintf("%d arguments cannot fit in %d bytes", nargs, len(p)), ErrTruncated)
	}
	m.Args = make([]string, 0, nargs)
	for i := 0; i < int(nargs); i++ {
		arg, rest, fe := parseTextArg(p, m.TID, i)
		if fe != nil {
			return m, fe
		}
		m.Args, p = append(m.Args, arg), rest
	}
	if len(p) != 0 {
		return m, tidText(m.TID, "trailer", fmt.Sprintf("%d bytes after the last argument", len(p)), ErrMalformed)
	}
	return m, nil
}

func parseTextArg(p []byte, tid uint32, i int) (string, []byte, *FrameError) {
	field := fmt.Sprintf("arg %d", i)
	if len(p) < 2+textArgDigits || p[0] != ' ' || p[1+textArgDigits] != ':' {
		return "", nil, tidText(tid, field, "not \" LLLLLLLL:characters\"", ErrMalformed)
	}
	n, ok := hexValue(p[1 : 1+textArgDigits])
	if !ok {
		return "", nil, tidText(tid, field, "length is not hex", ErrMalformed)
	}
	p = p[2+textArgDigits:]
	if n > uint64(len(p)) {
		return "", nil, tidText(tid, field, fmt.Sprintf("string of %d bytes, %d left", n, len(p)), ErrTruncated)
	}
	return string(p[:n]), p[n:], nil
}

func tidText(tid uint32, field, reason string, err error) *FrameError {
	fe := textErr(field, reason, err)
	fe.TID, fe.TIDKnown = tid, true
	return fe
}
