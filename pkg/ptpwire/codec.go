package ptpwire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gridwire/gridwire/pkg/ptpwire/huffman"
)

// Detect says which form a stream speaks from its first byte: a text frame opens with a
// hex digit of its length, a binary frame with the high byte of a 32-bit length, which is
// zero for any frame under 16 MiB (and anything that is not a hex digit is read as binary,
// where the length bound refuses it).
func Detect(first byte) Format {
	if isHexDigit(first) {
		return FormatText
	}
	return FormatBinary
}

// Decoder reads messages from one peer. The first Decode fixes the form; the Huffman
// table state of a binary peer lives here, one per direction as in PTP.
type Decoder struct {
	r      *bufio.Reader
	max    int
	format Format
	huff   huffman.Decompressor
	buf    []byte
}

// NewDecoder reads from r with DefaultMaxFrame as the bound.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 32<<10), max: DefaultMaxFrame, huff: huffman.Decompressor{Max: DefaultMaxFrame}}
}

// SetMaxFrame changes the bound on a frame and on a decompressed payload.
func (d *Decoder) SetMaxFrame(n int) { d.max, d.huff.Max = n, n }

// Format is the peer's form, FormatUnknown before the first frame.
func (d *Decoder) Format() Format { return d.format }

// Decode reads the next message. At a clean end of stream it returns io.EOF. Any other
// error is a *FrameError; when its Resync is false the stream cannot be read further.
func (d *Decoder) Decode() (Message, error) {
	if d.format == FormatUnknown {
		b, err := d.r.Peek(1)
		if err != nil {
			return Message{}, err
		}
		d.format = Detect(b[0])
	}
	if d.format == FormatText {
		return d.decodeText()
	}
	return d.decodeBinary()
}

func (d *Decoder) fatal(field, reason string, err error) error {
	return &FrameError{Format: d.format, Field: field, Reason: reason, Err: err}
}

// readFull reads n bytes into d.buf; an end of stream inside a frame is ErrTruncated.
func (d *Decoder) readFull(n int, field string, first bool) ([]byte, error) {
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	b := d.buf[:n]
	got, err := io.ReadFull(d.r, b)
	if err == io.EOF && first {
		return nil, io.EOF
	}
	if err != nil {
		return nil, d.fatal(field, fmt.Sprintf("stream ended after %d of %d bytes (%v)", got, n, err), ErrTruncated)
	}
	return b, nil
}

func (d *Decoder) decodeText() (Message, error) {
	lb, err := d.readFull(textLenDigits, "length", true)
	if err != nil {
		return Message{}, err
	}
	n, ok := hexValue(lb)
	if !ok {
		return Message{}, d.fatal("length", fmt.Sprintf("%q is not 8 hex digits", lb), ErrMalformed)
	}
	if n < textHeaderSize || n > uint64(d.max) {
		return Message{}, d.fatal("length", fmt.Sprintf("%d bytes, allowed %d to %d", n, textHeaderSize, d.max), ErrTooLarge)
	}
	p, err := d.readFull(int(n), "message", false)
	if err != nil {
		return Message{}, err
	}
	m, fe := parseTextMessage(p)
	if fe != nil {
		return m, fe
	}
	return m, nil
}

func (d *Decoder) decodeBinary() (Message, error) {
	lb, err := d.readFull(4, "length", true)
	if err != nil {
		return Message{}, err
	}
	n := int64(int32(binary.BigEndian.Uint32(lb)))
	if n < 1 || n > int64(d.max) {
		return Message{}, d.fatal("length", fmt.Sprintf("%d bytes, allowed 1 to %d", n, d.max), ErrTooLarge)
	}
	p, err := d.readFull(int(n), "packet", false)
	if err != nil {
		return Message{}, err
	}
	flags, p := p[0], p[1:]
	if flags&^(FlagCompressed|FlagTable) != 0 || flags == FlagTable {
		return Message{}, binErr("flags", fmt.Sprintf("flag byte %#02x", flags), ErrMalformed)
	}
	if flags&FlagCompressed != 0 {
		p, err = d.huff.Decompress(p, flags&FlagTable != 0)
		if err != nil {
			// The code table may now be out of step with the peer's: stop reading.
			return Message{}, &FrameError{Format: FormatBinary, Field: "compressed payload", Reason: err.Error(), Err: errors.Join(ErrCompressed, err)}
		}
	}
	m, fe := parseBinaryPayload(p)
	if fe != nil {
		return m, fe
	}
	return m, nil
}

// Encoder writes messages in one form. It is not safe for concurrent use.
type Encoder struct {
	w      io.Writer
	format Format
	comp   *huffman.Compressor
	buf    []byte
	frame  []byte
}

// NewEncoder writes frames of form f to w.
func NewEncoder(w io.Writer, f Format) *Encoder { return &Encoder{w: w, format: f} }

// Compress turns on Huffman compression of binary frames with PTP's policy: frames over
// 100 bytes are compressed when that saves over 100 bytes or carries a new table, the
// first compressed frame carrying PTP's default table.
func (e *Encoder) Compress() error {
	if e.format != FormatBinary {
		return fmt.Errorf("%w: only binary frames can be compressed", ErrEncode)
	}
	c, err := huffman.NewCompressor(huffman.DefaultTable())
	e.comp = c
	return err
}

// Policy thresholds of ProxyPacket.send / proxy_msg.c.
const (
	smallPacket     = 100
	compressionDiff = 100
)

// Append appends m's frame to dst.
func (e *Encoder) Append(dst []byte, m Message) ([]byte, error) {
	if e.format == FormatText {
		return AppendText(dst, m)
	}
	start := len(dst)
	dst, err := AppendBinary(dst, m)
	if err != nil || e.comp == nil || len(dst)-start <= smallPacket {
		return dst, err
	}
	if err := e.comp.Prepare(len(dst) - start); err != nil {
		return dst, err
	}
	payload := dst[start+5:]
	block, withTable := e.comp.Compress(e.frame[:0], payload)
	e.frame = block
	if len(payload)-len(block) <= compressionDiff && !withTable {
		return dst, nil
	}
	dst = dst[:start]
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)+1))
	flags := byte(FlagCompressed)
	if withTable {
		flags |= FlagTable
	}
	dst = append(dst, flags)
	return append(dst, block...), nil
}

// Encode writes m as one frame.
func (e *Encoder) Encode(m Message) error {
	var err error
	e.buf, err = e.Append(e.buf[:0], m)
	if err != nil {
		return err
	}
	_, err = e.w.Write(e.buf)
	return err
}
