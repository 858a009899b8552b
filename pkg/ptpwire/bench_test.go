package ptpwire

import (
	"bytes"
	"io"
	"testing"
)

// benchEvent is a typical CHANGE_JOB as the PTP endpoint sends it.
var benchEvent = Message{ID: EvJobChange, TID: 3, Args: []string{"1", "1005", "4", "jobState=RUNNING",
	"jobStatus=RUNNING", "jobNativeState=R", "jobStatusMessage=started on node17"}}

// BenchmarkEncode: one event into a frame, per form (and binary with PTP's compression,
// which leaves frames this small uncompressed after the first).
func BenchmarkEncode(b *testing.B) {
	for _, c := range []struct {
		name     string
		f        Format
		compress bool
	}{{"text", FormatText, false}, {"binary", FormatBinary, false}, {"binary-huffman", FormatBinary, true}} {
		b.Run(c.name, func(b *testing.B) {
			e := NewEncoder(io.Discard, c.f)
			if c.compress {
				_ = e.Compress()
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := e.Encode(benchEvent); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecode: frames of one event read back, per form (a new decoder, with its
// buffer, every 1,024 frames).
func BenchmarkDecode(b *testing.B) {
	for _, f := range []Format{FormatText, FormatBinary} {
		b.Run(f.String(), func(b *testing.B) {
			frame, _ := NewEncoder(nil, f).Append(nil, benchEvent)
			stream := bytes.Repeat(frame, 1024)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			r := bytes.NewReader(stream)
			d := NewDecoder(r)
			for b.Loop() {
				if _, err := d.Decode(); err == io.EOF {
					r.Reset(stream)
					d = NewDecoder(r)
				} else if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
