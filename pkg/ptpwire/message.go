// Package ptpwire is the wire of the Eclipse PTP resource-manager proxy protocol, in both
// of its forms:
//
//   - Text, as the 4.0 design document gives it: an 8-hex-digit length, a space, then
//     "IIII:TTTTTTTT:NNNNNNNN" (command or event ID, transaction ID, argument count in
//     hex) and each argument as " LLLLLLLL:characters".
//   - Binary, as Eclipse PTP 5's Java client (org.eclipse.ptp.proxy.protocol) and its C
//     proxies speak it: a 4-byte big-endian length, a flag byte, varint ID, TID and
//     argument count, each argument a type byte and two varint-length strings (key and
//     value of "key=value"), optionally Huffman-compressed (package huffman).
//
// A Decoder recognises which form a peer speaks from its first byte. The package owns
// framing, bounds, and the protocol's command and event vocabulary (IDs, argument
// layouts of the model events). It does not know gridwire: what a job or a cluster is,
// and how a command is carried out, belong to the endpoint that uses it.
package ptpwire

import (
	"errors"
	"fmt"
)

// Format is a wire form.
type Format int

// The two forms, and "not yet known".
const (
	FormatUnknown Format = iota
	FormatText           // the 4.0 design document's text framing
	FormatBinary         // PTP 5's binary frames
)

func (f Format) String() string {
	switch f {
	case FormatText:
		return "text"
	case FormatBinary:
		return "binary"
	}
	return "unknown"
}

// Message is one command or event: its numeric ID (a command or event code), the
// transaction ID matching events to commands, and its arguments. An argument is a plain
// string, or "key=value" for an attribute; the binary form carries the two halves apart.
type Message struct {
	ID   int
	TID  uint32
	Args []string
}

func (m Message) String() string { return fmt.Sprintf("%d(%d) %q", m.ID, m.TID, m.Args) }

// Bounds. A peer announcing more is refused before anything is allocated.
const (
	// DefaultMaxFrame is the largest frame (and uncompressed payload) accepted.
	DefaultMaxFrame = 4 << 20
	// MaxID is the largest message or transaction ID: both forms carry Java ints, and
	// the text header has room for 4 (ID) and 8 (TID) hex digits.
	MaxID = 1<<31 - 1
	// MaxArgs bounds the argument count of one message.
	MaxArgs = 1 << 20
)

// Sentinel errors; decode errors wrap one of them in a *FrameError.
var (
	ErrTooLarge   = errors.New("ptpwire: frame larger than the limit")
	ErrTruncated  = errors.New("ptpwire: frame ends early")
	ErrVarint     = errors.New("ptpwire: invalid varint")
	ErrNonASCII   = errors.New("ptpwire: non-ASCII byte where ASCII is required")
	ErrMalformed  = errors.New("ptpwire: malformed frame")
	ErrCompressed = errors.New("ptpwire: compressed frame does not decompress")
	ErrEncode     = errors.New("ptpwire: message cannot be encoded")
)

// FrameError describes a frame that could not be decoded. When Resync is true the frame's
// length was read whole, so the stream is still in step and the next frame can be read;
// TIDKnown says whether TID came from the frame's header, so an ERROR event can answer it.
type FrameError struct {
	Format   Format
	Field    string // which part: "length", "flags", "id", "tid", "nargs", "arg 3", ...
	Reason   string
	Err      error
	Resync   bool
	TID      uint32
	TIDKnown bool
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("ptpwire: %s frame: %s: %s", e.Format, e.Field, e.Reason)
}

func (e *FrameError) Unwrap() error { return e.Err }
