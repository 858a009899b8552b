package huffman

import (
	"encoding/binary"
	"fmt"
)

// The table policy of PTP's ProxyPacket.compressPacket and proxy_msg.c's compress_packet.
const (
	// RefreshAfter is how many bytes a sender codes before it considers a new table.
	RefreshAfter = 262144
	// LargePacket: a new table preferably rides on a packet larger than this.
	LargePacket = 8192
)

// Compressor is one direction's sending side: the code in use, the byte counts gathered
// since it was built, and whether the next block must carry the table.
type Compressor struct {
	code      *Code
	acc       [Symbols]int64
	accBytes  int
	sendTable bool
}

// NewCompressor starts from a table; like PTP's HuffmanByteCompress(int[]) its first
// block carries that table, so the peer need not assume one.
func NewCompressor(table [Symbols]int32) (*Compressor, error) {
	code, err := Build(table)
	if err != nil {
		return nil, err
	}
	c := &Compressor{code: code, sendTable: true}
	c.resetCounts()
	return c, nil
}

func (c *Compressor) resetCounts() {
	for i := range c.acc {
		c.acc[i] = 1
	}
	c.accBytes = 0
}

// Prepare applies the refresh policy before a payload of n bytes (the whole frame size
// as PTP counts it) is compressed: after RefreshAfter bytes, a large payload (or twice
// RefreshAfter bytes, whatever the size) makes the gathered counts the next table.
func (c *Compressor) Prepare(n int) error {
	if c.accBytes <= RefreshAfter || (n <= LargePacket && c.accBytes <= RefreshAfter*2) {
		return nil
	}
	var t [Symbols]int32
	var total int64
	for i, f := range c.acc {
		total += f
		t[i] = int32(min(f, maxTotal))
	}
	if total > maxTotal { // keep the proportions, stay within a Java int
		for i, f := range c.acc {
			t[i] = int32(f*int64(maxTotal/2)/total) + 1
		}
	}
	code, err := Build(t)
	if err != nil {
		return err
	}
	c.code, c.sendTable = code, true
	c.resetCounts()
	return nil
}

// WillSendTable reports whether the next Compress carries a table.
func (c *Compressor) WillSendTable() bool { return c.sendTable }

// Compress appends one compressed block of payload to dst and says whether it carries a
// table. The counts of payload's bytes feed the next table.
func (c *Compressor) Compress(dst, payload []byte) ([]byte, bool) {
	for _, b := range payload {
		c.acc[b]++
	}
	c.accBytes += len(payload)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	withTable := c.sendTable
	if withTable {
		dst = PutTable(dst, c.code.table)
		c.sendTable = false
	}
	return c.code.Encode(dst, payload), withTable
}

// Decompressor is one direction's receiving side.
type Decompressor struct {
	code *Code
	// Max bounds an uncompressed length; zero means no payload may be decompressed.
	Max int
}

// Decompress reads one block. A block with a table replaces the code in use; a block
// without one before any table uses the flat table, as PTP's HuffmanByteUncompress does.
func (d *Decompressor) Decompress(block []byte, withTable bool) ([]byte, error) {
	if len(block) < 4 {
		return nil, fmt.Errorf("%w: no uncompressed length", ErrTruncated)
	}
	n := int64(int32(binary.BigEndian.Uint32(block)))
	block = block[4:]
	if n < 0 || n > int64(d.Max) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, n, d.Max)
	}
	if err := d.useTable(&block, withTable); err != nil {
		return nil, err
	}
	if n > int64(len(block))*8 {
		return nil, fmt.Errorf("%w: %d bytes cannot come from %d bytes of code", ErrTruncated, n, len(block))
	}
	return d.code.Decode(block, int(n))
}

func (d *Decompressor) useTable(block *[]byte, withTable bool) error {
	if !withTable {
		if d.code == nil {
			code, err := Build(FlatTable())
			if err != nil {
				return err
			}
			d.code = code
		}
		return nil
	}
	t, err := ReadTable(*block)
	if err != nil {
		return err
	}
	code, err := Build(t)
	if err != nil {
		return err
	}
	d.code = code
	*block = (*block)[TableSize:]
	return nil
}
