package events

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// appendSDKStringByByte is appendSDKString as it was written before the eight-byte
// skip: the reference the fast one must equal.
func appendSDKStringByByte(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > 31 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Every byte value at every position of strings up to 24 bytes long, among safe bytes,
// and random strings: the same bytes as the byte-by-byte writer.
func TestAppendSDKStringMatchesByteByByte(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := appendSDKString([]byte("x"), s), appendSDKStringByByte([]byte("x"), s); !bytes.Equal(got, want) {
			t.Fatalf("appendSDKString(%q) = %q, want %q", s, got, want)
		}
	}
	for n := 0; n <= 24; n++ {
		base := strings.Repeat("a", n)
		check(base)
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				check(base[:pos] + string([]byte{byte(c)}) + base[pos+1:])
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("\x00\x01\x1f \x7f\x80\xff\"\\\n\r\tAZaz09._-~!")
	for range 20000 {
		b := make([]byte, r.IntN(80))
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = byte(r.IntN(256))
			}
		}
		check(string(b))
	}
}

func FuzzAppendSDKString(f *testing.F) {
	f.Add("plain ascii signature.0.64.AAAA")
	f.Add("quote\" slash\\ nl\n \x00\x1f\x20\x7f\xc3\xa9")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := appendSDKString(nil, s), appendSDKStringByByte(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendSDKString(%q) = %q, want %q", s, got, want)
		}
	})
}

func BenchmarkAppendSDKString(b *testing.B) {
	s := strings.Repeat("Zm9vYmFyYmF6cXV4", 22) // a batch signature's length, base64url
	buf := make([]byte, 0, 512)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			buf = appendSDKString(buf[:0], s)
		}
	})
	b.Run("bytewise", func(b *testing.B) {
		for b.Loop() {
			buf = appendSDKStringByByte(buf[:0], s)
		}
	})
}
