package huffman

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestJavaBlocks decodes blocks made by Eclipse PTP 5's own HuffmanByteCompress (run once
// on these inputs; testdata/java_blocks.txt holds input and block in hex, one pair a line,
// the first block carrying the default table and a later one a refreshed table), and
// checks that the same table here codes every input to the same bits. PTP's coder leaves
// stale bits after the last code in the final byte, so that byte is compared only up to
// where the code ends.
func TestJavaBlocks(t *testing.T) {
	raw, err := os.ReadFile("testdata/java_blocks.txt")
	if err != nil {
		t.Fatal(err)
	}
	d := Decompressor{Max: 1 << 20}
	var table [Symbols]int32
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	for i, line := range lines {
		in, block := mustHex(t, line, 0), mustHex(t, line, 1)
		withTable := i == 0 || i == len(lines)-2
		out, err := d.Decompress(block, withTable)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("line %d: Java block decodes to %q, %v; want %q", i+1, out, err, in)
		}
		if withTable {
			table, _ = ReadTable(block[4:])
		}
		code, err := Build(table)
		if err != nil {
			t.Fatal(err)
		}
		head := 4
		if withTable {
			head += TableSize
		}
		mine := code.Encode(nil, in)
		theirs := block[head:]
		nbits := 0
		for _, b := range in {
			nbits += len(code.bits[b])
		}
		if len(mine) != len(theirs) || !bytes.Equal(mine[:nbits/8], theirs[:nbits/8]) ||
			(nbits%8 != 0 && (mine[nbits/8]^theirs[nbits/8])&(1<<(nbits%8)-1) != 0) {
			t.Fatalf("line %d: bits %x, PTP's %x", i+1, mine, theirs)
		}
	}
}

func mustHex(t *testing.T, line string, field int) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Fields(line)[field])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTripAcrossTables(t *testing.T) {
	c, err := NewCompressor(DefaultTable())
	if err != nil {
		t.Fatal(err)
	}
	d := Decompressor{Max: 1 << 22}
	payload := bytes.Repeat([]byte("jobState=RUNNING\x00\x01\xff"), 20000)
	for round := 0; round < 3; round++ {
		if err := c.Prepare(len(payload)); err != nil {
			t.Fatal(err)
		}
		block, withTable := c.Compress(nil, payload)
		if round == 2 && !withTable {
			t.Fatalf("round %d: no new table after %d bytes", round, 2*len(payload))
		}
		out, err := d.Decompress(block, withTable)
		if err != nil || !bytes.Equal(out, payload) {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

func TestDecompressRejects(t *testing.T) {
	d := Decompressor{Max: 100}
	if _, err := d.Decompress([]byte{0, 0, 1, 0, 0xff}, false); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized: %v", err)
	}
	if _, err := d.Decompress([]byte{0xff, 0xff, 0xff, 0xff}, false); !errors.Is(err, ErrTooLarge) {
		t.Errorf("negative: %v", err)
	}
	if _, err := d.Decompress([]byte{0, 0, 0, 50, 0xff}, false); !errors.Is(err, ErrTruncated) {
		t.Errorf("short code: %v", err)
	}
	if _, err := d.Decompress([]byte{0, 0, 0, 1, 1, 2}, true); !errors.Is(err, ErrTruncated) {
		t.Errorf("short table: %v", err)
	}
	bad := PutTable([]byte{0, 0, 0, 1}, [Symbols]int32{0: -5})
	if _, err := d.Decompress(bad, true); !errors.Is(err, ErrTable) {
		t.Errorf("negative frequency: %v", err)
	}
	var huge [Symbols]int32
	for i := range huge {
		huge[i] = 1 << 30
	}
	if _, err := d.Decompress(PutTable([]byte{0, 0, 0, 1}, huge), true); !errors.Is(err, ErrTable) {
		t.Errorf("overflowing table: %v", err)
	}
}

func FuzzDecompress(f *testing.F) {
	c, _ := NewCompressor(DefaultTable())
	first, _ := c.Compress(nil, []byte("execName=echo"))
	second, _ := c.Compress(nil, []byte("progArgs=hello"))
	f.Add(first, true)
	f.Add(second, false)
	f.Add([]byte{0, 0, 0, 3, 0xaa, 0x55}, false)
	f.Fuzz(func(t *testing.T, block []byte, withTable bool) {
		d := Decompressor{Max: 1 << 16}
		out, err := d.Decompress(block, withTable)
		if err != nil {
			return
		}
		// Whatever decoded must encode back to a block that decodes to the same bytes.
		enc, err := NewCompressor(d.code.Table())
		if err != nil {
			t.Fatalf("table that decoded does not build: %v", err)
		}
		again, wt := enc.Compress(nil, out)
		d2 := Decompressor{Max: 1 << 16}
		back, err := d2.Decompress(again, wt)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("re-encode of %x failed: %v", out, err)
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("jobSubId=1"), int32(7))
	f.Fuzz(func(t *testing.T, payload []byte, skew int32) {
		table := DefaultTable()
		table[byte(skew)] += skew & 0xffff
		c, err := NewCompressor(table)
		if err != nil {
			return
		}
		block, wt := c.Compress(nil, payload)
		d := Decompressor{Max: len(payload)}
		out, err := d.Decompress(block, wt)
		if err != nil || !bytes.Equal(out, payload) {
			t.Fatalf("round trip of %x: %v", payload, err)
		}
	})
}
