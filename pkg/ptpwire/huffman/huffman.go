// Package huffman is the byte Huffman coder of Eclipse PTP 5's proxy protocol, bit for
// bit: the same tree from the same 256 frequencies (PTP's two-queue construction and its
// tie-breaking), codes packed least-significant bit first, and the same compressed block
// layout: a big-endian uncompressed length, optionally the 256 big-endian frequencies of a
// new table, then the code bits.
//
// It owns the coding and the table policy (when a sender ships a new table). It does not
// know frames or flag bytes; package ptpwire does.
package huffman

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Symbols is the alphabet size: every byte value.
const Symbols = 256

// TableSize is the size of a frequency table on the wire.
const TableSize = Symbols * 4

// Sentinel errors.
var (
	ErrTable     = errors.New("huffman: invalid frequency table")
	ErrTruncated = errors.New("huffman: compressed data ends early")
	ErrTooLarge  = errors.New("huffman: uncompressed length over the limit")
	ErrNoTable   = errors.New("huffman: no table")
)

// maxTotal keeps the sum of frequencies within a Java int, as PTP's coder assumes.
const maxTotal = 1<<31 - 1

// DefaultTable is the frequency table PTP's Java client and C proxies start their
// compressors with (ProxyPacket.getDefaultHuffmanTable, proxy_msg.c's frequency_table).
func DefaultTable() [Symbols]int32 {
	return [Symbols]int32{422, 420, 418, 416, 414, 412, 410, 408, 406, 404, 402, 400, 398, 396, 394, 392, 390, 388,
		386, 384, 382, 380, 378, 376, 374, 372, 370, 368, 366, 364, 362, 1802, 450, 448, 446, 444, 442, 440, 438, 436, 434,
		432, 430, 428, 426, 424, 1652, 1550, 1500, 1450, 1400, 1350, 1300, 1250, 1200, 1150, 1100, 1050, 1000, 950, 900,
		850, 800, 750, 4500, 2950, 2900, 2850, 4400, 2800, 2750, 2700, 4300, 2700, 2650, 2600, 2550, 2500, 4200, 2450,
		2400, 2350, 2300, 2250, 2200, 2150, 2100, 2050, 2000, 1950, 1900, 1850, 1800, 500, 1700, 1650, 5000, 4000, 3950,
		3900, 4900, 3850, 3800, 3750, 4800, 3700, 3650, 3600, 3550, 3500, 4700, 3450, 3400, 3350, 3300, 3250, 4600, 3200,
		3150, 3100, 3050, 3000, 750, 700, 650, 600, 550, 360, 358, 356, 354, 352, 350, 348, 346, 344, 342, 340, 338, 336,
		334, 332, 330, 328, 326, 324, 322, 320, 318, 316, 314, 312, 310, 308, 306, 304, 302, 300, 298, 296, 294, 292, 290,
		288, 286, 284, 282, 280, 278, 276, 274, 272, 270, 268, 266, 264, 262, 260, 258, 256, 254, 252, 250, 248, 246, 244,
		242, 240, 238, 236, 234, 232, 230, 228, 226, 224, 222, 220, 218, 216, 214, 212, 210, 208, 206, 204, 202, 200, 198,
		196, 194, 192, 190, 188, 186, 184, 182, 180, 178, 176, 174, 172, 170, 168, 166, 164, 162, 160, 158, 156, 154, 152,
		150, 148, 146, 144, 142, 140, 138, 136, 134, 132, 130, 128, 126, 124, 122, 120, 118, 116, 114, 112, 110, 108, 106,
		104}
}

// FlatTable is the table a PTP decoder assumes before it has received any: all ones.
func FlatTable() [Symbols]int32 {
	var t [Symbols]int32
	for i := range t {
		t[i] = 1
	}
	return t
}

type node struct {
	freq        int64
	sym         int
	left, right *node
}

// Code is a built tree plus per-symbol codes.
type Code struct {
	root  *node
	bits  [Symbols][]byte // code of each symbol, one 0/1 per element, root first
	table [Symbols]int32
}

// Build makes the tree PTP's HuffmanCoder.buildHuffmanTree makes from the table.
func Build(table [Symbols]int32) (*Code, error) {
	var total int64
	leaves := make([]*node, Symbols)
	for i, f := range table {
		if f < 0 {
			return nil, fmt.Errorf("%w: symbol %d has frequency %d", ErrTable, i, f)
		}
		total += int64(f)
		leaves[i] = &node{freq: int64(f), sym: i}
	}
	if total > maxTotal {
		return nil, fmt.Errorf("%w: frequencies sum to %d, over %d", ErrTable, total, int64(maxTotal))
	}
	sort.SliceStable(leaves, func(i, j int) bool { return leaves[i].freq < leaves[j].freq })
	c := &Code{root: twoQueues(leaves), table: table}
	c.assign(c.root, nil)
	return c, nil
}

// twoQueues is PTP's combineNodes loop, kept step for step so ties break the same way.
func twoQueues(q1 []*node) *node {
	q2 := make([]*node, 0, Symbols)
	low1, low2 := 0, 0
	for left := len(q1); left > 1; left-- {
		len1, len2 := len(q1)-low1, len(q2)-low2
		var n1, n2 *node
		switch {
		case len1 > 0 && len2 > 0:
			n1, n2, low1, low2 = pickMixed(q1, q2, low1, low2, len1, len2)
		case len1 > 0:
			n1, n2 = q1[low1], q1[low1+1]
			low1 += 2
		default:
			n1, n2 = q2[low2], q2[low2+1]
			low2 += 2
		}
		parent := &node{freq: n1.freq + n2.freq, left: n1, right: n2}
		if len(q1)-low1 == 0 || parent.freq > q1[len(q1)-1].freq {
			q1 = append(q1, parent)
		} else {
			q2 = append(q2, parent)
		}
	}
	if len(q1)-low1 > 0 {
		return q1[low1]
	}
	return q2[low2]
}

func pickMixed(q1, q2 []*node, low1, low2, len1, len2 int) (n1, n2 *node, l1, l2 int) {
	var n3 *node
	fromQ1 := q1[low1].freq-q2[low2].freq < 0
	if fromQ1 {
		n1, n2 = q1[low1], q2[low2]
		if len1 > 1 {
			n3 = q1[low1+1]
		}
		low1++
	} else {
		n1, n2 = q2[low2], q1[low1]
		if len2 > 1 {
			n3 = q2[low2+1]
		}
		low2++
	}
	// Take the second node from the same queue when it is lighter than the other head.
	sameQueue := n3 != nil && n2.freq-n3.freq > 0
	if sameQueue {
		n2 = n3
	}
	if fromQ1 == sameQueue {
		low1++
	} else {
		low2++
	}
	return n1, n2, low1, low2
}

func (c *Code) assign(n *node, prefix []byte) {
	if n.left == nil {
		c.bits[n.sym] = append([]byte(nil), prefix...)
		return
	}
	c.assign(n.left, append(prefix, 0))
	c.assign(n.right, append(prefix, 1))
}

// Table returns the frequencies the code was built from.
func (c *Code) Table() [Symbols]int32 { return c.table }

// Encode appends the code bits of src to dst, least significant bit first. Like PTP's
// encoder the result is 1+bits/8 bytes long (one zero byte more when the bits fill whole
// bytes), except that nothing at all encodes to nothing.
func (c *Code) Encode(dst, src []byte) []byte {
	start := len(dst)
	var acc byte
	var nbits uint
	for _, b := range src {
		for _, bit := range c.bits[b] {
			acc |= bit << nbits
			nbits++
			if nbits == 8 {
				dst = append(dst, acc)
				acc, nbits = 0, 0
			}
		}
	}
	if len(dst) == start && nbits == 0 {
		return dst
	}
	return append(dst, acc)
}

// Decode reads n symbols from the code bits in src.
func (c *Code) Decode(src []byte, n int) ([]byte, error) {
	out := make([]byte, 0, n)
	pos, limit := 0, len(src)*8
	for len(out) < n {
		nd := c.root
		for nd.left != nil {
			if pos >= limit {
				return nil, fmt.Errorf("%w: %d of %d bytes decoded", ErrTruncated, len(out), n)
			}
			if src[pos>>3]&(1<<(pos&7)) != 0 {
				nd = nd.right
			} else {
				nd = nd.left
			}
			pos++
		}
		out = append(out, byte(nd.sym))
	}
	return out, nil
}

// PutTable appends a table in wire form (256 big-endian 32-bit integers).
func PutTable(dst []byte, t [Symbols]int32) []byte {
	for _, f := range t {
		dst = binary.BigEndian.AppendUint32(dst, uint32(f))
	}
	return dst
}

// ReadTable reads a table in wire form.
func ReadTable(src []byte) ([Symbols]int32, error) {
	var t [Symbols]int32
	if len(src) < TableSize {
		return t, fmt.Errorf("%w: table needs %d bytes, have %d", ErrTruncated, TableSize, len(src))
	}
	for i := range t {
		t[i] = int32(binary.BigEndian.Uint32(src[i*4:]))
	}
	return t, nil
}
