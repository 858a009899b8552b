package ptpwire

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Flag bits of a binary frame (ProxyPacket's COMPRESSION_FLAG and COMPRESSION_TABLE_FLAG).
const (
	FlagCompressed = 0x40
	FlagTable      = 0x10
)

// Argument type bytes (ProtocolUtil.TYPE_*). PTP 5 sends only TypeStringAttr and reads
// every type as a key/value pair, and so does this package.
const (
	TypeStringAttr  = 0
	TypeInteger     = 1
	TypeBitset      = 2
	TypeString      = 3
	TypeIntegerAttr = 4
	TypeBooleanAttr = 5
)

// maxVarint is the longest varint a Java int needs.
const maxVarint = 5

// AppendVarint appends v in PTP's varint form (protocol buffers' base-128, low group first).
func AppendVarint(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// ReadVarint reads one varint from b, returning the value and the bytes it used. Values
// above MaxID and encodings longer than five bytes are refused: PTP's Java VarInt would
// wrap them into negative or wrong ints.
func ReadVarint(b []byte) (uint32, int, error) {
	var v uint64
	for i := 0; i < len(b) && i < maxVarint; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			if v > MaxID {
				return 0, 0, fmt.Errorf("%w: value %d over %d", ErrVarint, v, MaxID)
			}
			return uint32(v), i + 1, nil
		}
	}
	if len(b) < maxVarint {
		return 0, 0, fmt.Errorf("%w: ends after %d bytes", ErrTruncated, len(b))
	}
	return 0, 0, fmt.Errorf("%w: longer than %d bytes", ErrVarint, maxVarint)
}

// appendBinaryPayload appends what follows the flag byte: ID, TID, count and arguments.
func appendBinaryPayload(dst []byte, m Message) ([]byte, error) {
	if m.ID < 0 || m.ID > MaxID || m.TID > MaxID || len(m.Args) > MaxArgs {
		return dst, fmt.Errorf("%w: id %d, tid %d, %d args", ErrEncode, m.ID, m.TID, len(m.Args))
	}
	dst = AppendVarint(dst, uint32(m.ID))
	dst = AppendVarint(dst, m.TID)
	dst = AppendVarint(dst, uint32(len(m.Args)))
	for i, a := range m.Args {
		if !isASCII(a) {
			return dst, fmt.Errorf("%w: argument %d is not ASCII", ErrEncode, i)
		}
		key, val, ok := strings.Cut(a, "=")
		if !ok || key == "" { // no key: the whole argument is the value
			key, val = "", a
		}
		dst = append(dst, TypeStringAttr)
		dst = AppendVarint(dst, uint32(len(key)))
		dst = append(dst, key...)
		dst = AppendVarint(dst, uint32(len(val)))
		dst = append(dst, val...)
	}
	return dst, nil
}

// AppendBinary appends one uncompressed binary frame.
func AppendBinary(dst []byte, m Message) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0) // length, flags
	dst, err := appendBinaryPayload(dst, m)
	if err != nil {
		return dst[:start], err
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, nil
}

// parseBinaryPayload reads an uncompressed payload. PTP's Java client compresses a
// buffer five bytes longer than the packet, so a decompressed payload may end in zero
// bytes; those are allowed, anything else after the last argument is not.
func parseBinaryPayload(p []byte) (Message, *FrameError) {
	var m Message
	fields := [3]uint32{}
	for i, name := range [3]string{"id", "tid", "nargs"} {
		v, n, err := ReadVarint(p)
		if err != nil {
			fe := binErr(name, err.Error(), err)
			fe.TID, fe.TIDKnown = fields[1], i > 1
			return m, fe
		}
		fields[i], p = v, p[n:]
	}
	m.ID, m.TID = int(fields[0]), fields[1]
	nargs := fields[2]
	if int64(nargs)*3 > int64(len(p)) || nargs > MaxArgs {
		return m, tidErr(m.TID, "nargs", fmt.Sprintf("%d arguments cannot fit in %d bytes", nargs, len(p)), ErrTruncated)
	}
	m.Args = make([]string, 0, nargs)
	for i := 0; i < int(nargs); i++ {
		arg, rest, fe := parseBinaryArg(p, m.TID, i)
		if fe != nil {
			return m, fe
		}
		m.Args, p = append(m.Args, arg), rest
	}
	for _, b := range p {
		if b != 0 {
			return m, tidErr(m.TID, "trailer", fmt.Sprintf("%d bytes after the last argument", len(p)), ErrMalformed)
		}
	}
	return m, nil
}

func parseBinaryArg(p []byte, tid uint32, i int) (string, []byte, *FrameError) {
	field := fmt.Sprintf("arg %d", i)
	if len(p) == 0 {
		return "", nil, tidErr(tid, field, "missing", ErrTruncated)
	}
	if p[0] > TypeBooleanAttr {
		return "", nil, tidErr(tid, field, fmt.Sprintf("unknown type byte %d", p[0]), ErrMalformed)
	}
	p = p[1:]
	var parts [2]string
	for j := range parts {
		n, used, err := ReadVarint(p)
		if err != nil {
			return "", nil, tidErr(tid, field, err.Error(), err)
		}
		p = p[used:]
		if int(n) > len(p) {
			return "", nil, tidErr(tid, field, fmt.Sprintf("string of %d bytes, %d left", n, len(p)), ErrTruncated)
		}
		if !isASCII(string(p[:n])) {
			return "", nil, tidErr(tid, field, "not US-ASCII", ErrNonASCII)
		}
		parts[j], p = string(p[:n]), p[n:]
	}
	if parts[0] == "" {
		return parts[1], p, nil
	}
	return parts[0] + "=" + parts[1], p, nil
}

func binErr(field, reason string, err error) *FrameError {
	return &FrameError{Format: FormatBinary, Field: field, Reason: reason, Err: err, Resync: true}
}

func tidErr(tid uint32, field, reason string, err error) *FrameError {
	fe := binErr(field, reason, err)
	fe.TID, fe.TIDKnown = tid, true
	return fe
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// ASCII returns s with every byte outside US-ASCII replaced by '?', which is what PTP's
// Java encoder does to such characters; use it on free text before sending it.
func ASCII(s string) string {
	if isASCII(s) {
		return s
	}
	b := []byte(s)
	for i := range b {
		if b[i] >= 0x80 {
			b[i] = '?'
		}
	}
	return string(b)
}
