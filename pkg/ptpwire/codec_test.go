package ptpwire

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestJavaClientFrames decodes the frames Eclipse PTP 5's own ProxyPacket wrote for a
// session's commands (run once; testdata/java_commands.bin), the SUBMIT_JOB compressed
// with the default Huffman table riding along as PTP's client does for frames over 100
// bytes, and the second SUBMIT_JOB compressed with that table.
func TestJavaClientFrames(t *testing.T) {
	raw, err := os.ReadFile("testdata/java_commands.bin")
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(bytes.NewReader(raw))
	var got []Message
	for {
		m, err := d.Decode()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("frame %d: %v", len(got), err)
		}
		got = append(got, m)
	}
	if d.Format() != FormatBinary {
		t.Fatalf("format %v", d.Format())
	}
	want := []Message{
		{ID: 1, TID: 0, Args: []string{"version=2.0", "baseId=1000"}},
		{ID: 2, TID: 1, Args: []string{}},
		{ID: 3, TID: 2, Args: []string{}},
		{ID: 5, TID: 3, Args: []string{"jobSubId=sub-1", "execName=echo", "execPath=/bin", "workingDir=/tmp", "progArgs=hello", "progArgs=", "env=A=1=2", "launchedByPTP=true", "jobNumProcs=1", "queueId=1004"}},
		{ID: 5, TID: 4, Args: []string{"jobSubId=sub-2", "execName=sleep", "execPath=/bin", "progArgs=60"}},
		{ID: 6, TID: 5, Args: []string{"jobId=1010"}},
		{ID: 4, TID: 6, Args: []string{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
	if CommandOf(FormatBinary, got[3].ID) != CmdSubmitJob || CommandOf(FormatText, 8) != CmdChangeJob || CommandOf(FormatBinary, 8) != CmdSuspendEvents {
		t.Fatal("command numbering")
	}
}

func TestRoundTripBothForms(t *testing.T) {
	msgs := []Message{
		{ID: 1, TID: 7, Args: []string{"version=2.0", "baseId=4"}},
		{ID: EvNewJob, TID: 9, Args: []string{"1004", "1", "1010-1012", "2", "jobState=RUNNING", "name=a b"}},
		{ID: 0, TID: 0, Args: []string{}},
		{ID: EvError, TID: 3, Args: []string{"2", "errorCode=1", "errorMsg=x=y"}},
		{ID: 5, TID: 1, Args: []string{"progArgs=" + strings.Repeat("long argument ", 200)}},
	}
	for _, f := range []Format{FormatText, FormatBinary} {
		for _, compress := range []bool{false, true} {
			if compress && f == FormatText {
				continue
			}
			var buf bytes.Buffer
			e := NewEncoder(&buf, f)
			if compress {
				if err := e.Compress(); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range msgs {
				if err := e.Encode(m); err != nil {
					t.Fatal(err)
				}
			}
			if compress && bytes.IndexByte(buf.Bytes(), FlagCompressed|FlagTable) < 0 {
				t.Fatalf("no compressed frame written")
			}
			d := NewDecoder(&buf)
			for i, want := range msgs {
				got, err := d.Decode()
				if err != nil {
					t.Fatalf("%v compress=%v msg %d: %v", f, compress, i, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("%v msg %d (-want +got):\n%s", f, i, diff)
				}
			}
			if _, err := d.Decode(); err != io.EOF {
				t.Fatalf("after the last frame: %v", err)
			}
			if d.Format() != f {
				t.Fatalf("detected %v, want %v", d.Format(), f)
			}
		}
	}
}

func TestTextFrameLayout(t *testing.T) {
	b, err := AppendText(nil, Message{ID: 1, TID: 0x2a, Args: []string{"version=2.0", "A String"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "0000003E 0001:0000002A:00000002 0000000B:version=2.0 00000008:A String"
	if string(b) != want {
		t.Fatalf("got  %q\nwant %q", b, want)
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		want   error
		resync bool
		tid    bool
	}{
		{"text length not hex", "0000003G 0001:00000001:00000000", ErrMalformed, false, false},
		{"text oversized", "7FFFFFFF ", ErrTooLarge, false, false},
		{"text truncated", "00000030 0001:00000001:00000000", ErrTruncated, false, false},
		{"text bad header", "00000017 0001-00000001:00000000", ErrMalformed, true, false},
		{"text arg count lies", "00000017 0001:00000005:00000003", ErrTruncated, true, true},
		{"text arg length lies", "00000023 0001:00000005:00000001 00000009:ab", ErrTruncated, true, true},
		{"text non-ascii", "00000018 0001:00000005:00000000\xff", ErrNonASCII, true, false},
		{"binary oversized", "\x7f\xff\xff\xff\x00", ErrTooLarge, false, false},
		{"binary negative", "\xff\xff\xff\xff\x00", ErrTooLarge, false, false},
		{"binary truncated", "\x00\x00\x00\x10\x00\x01", ErrTruncated, false, false},
		{"binary varint too long", "\x00\x00\x00\x07\x00\x01\xff\xff\xff\xff\xff", ErrVarint, true, false},
		{"binary varint over int", "\x00\x00\x00\x07\x00\x01\xff\xff\xff\xff\x0f", ErrVarint, true, false},
		{"binary args overflow", "\x00\x00\x00\x05\x00\x01\x02\x7f\x00", ErrTruncated, true, true},
		{"binary string overflow", "\x00\x00\x00\x08\x00\x01\x02\x01\x00\x00\x09a", ErrTruncated, true, true},
		{"binary non-ascii", "\x00\x00\x00\x09\x00\x01\x02\x01\x00\x00\x02a\xe9", ErrNonASCII, true, true},
		{"binary bad type", "\x00\x00\x00\x07\x00\x01\x02\x01\x09\x00\x00", ErrMalformed, true, true},
		{"binary trailer", "\x00\x00\x00\x05\x00\x01\x02\x00\x07", ErrMalformed, true, true},
		{"binary bad flags", "\x00\x00\x00\x04\x01\x01\x02\x00", ErrMalformed, true, false},
		{"binary bad compressed", "\x00\x00\x00\x06\x40\x00\x00\x00\x09\x00", ErrCompressed, false, false},
	}
	for _, c := range cases {
		d := NewDecoder(strings.NewReader(c.in))
		_, err := d.Decode()
		var fe *FrameError
		if !errors.As(err, &fe) || !errors.Is(err, c.want) || fe.Resync != c.resync || fe.TIDKnown != c.tid {
			t.Errorf("%s: %v (resync %v tid %v), want %v resync %v tid %v", c.name, err, fe != nil && fe.Resync, fe != nil && fe.TIDKnown, c.want, c.resync, c.tid)
		}
	}
}

// TestResyncAfterBadFrame: a frame whose length was read whole leaves the stream in step.
func TestResyncAfterBadFrame(t *testing.T) {
	good, _ := AppendText(nil, Message{ID: 0, TID: 1})
	in := append([]byte("00000017 0001:00000005:00000003"), good...)
	d := NewDecoder(bytes.NewReader(in))
	if _, err := d.Decode(); err == nil {
		t.Fatal("bad frame decoded")
	}
	m, err := d.Decode()
	if err != nil || m.TID != 1 {
		t.Fatalf("next frame: %v %v", m, err)
	}
}

func FuzzDecode(f *testing.F) {
	raw, _ := os.ReadFile("testdata/java_commands.bin")
	f.Add(raw)
	t1, _ := AppendText(nil, Message{ID: 5, TID: 3, Args: []string{"execName=echo", "progArgs=hi"}})
	f.Add(t1)
	f.Add([]byte("00000017 0001:00000005:00000003"))
	f.Add([]byte("\x00\x00\x00\x05\x00\x01\x02\x00\x07"))
	f.Fuzz(func(t *testing.T, in []byte) {
		d := NewDecoder(bytes.NewReader(in))
		d.SetMaxFrame(1 << 16)
		for i := 0; i < 64; i++ {
			m, err := d.Decode()
			var fe *FrameError
			if errors.As(err, &fe) && fe.Resync {
				continue
			}
			if err != nil {
				return
			}
			// Anything decoded re-encodes in its form and decodes to the same message.
			var buf bytes.Buffer
			if err := NewEncoder(&buf, d.Format()).Encode(m); err != nil {
				t.Fatalf("decoded %v does not encode: %v", m, err)
			}
			back, err := NewDecoder(&buf).Decode()
			if err != nil {
				t.Fatalf("re-encoded %v does not decode: %v", m, err)
			}
			if len(back.Args) == 0 && len(m.Args) == 0 {
				back.Args, m.Args = nil, nil
			}
			if diff := cmp.Diff(m, back); diff != "" {
				t.Fatalf("round trip changed %v:\n%s", m, diff)
			}
		}
	})
}
