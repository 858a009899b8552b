package main

import (
	"context"
	"encoding/json"
	"testing"
)

// One small run of `gridwire bench` measures every figure its table prints, and the
// scale mode builds a log of whole histories the read side then serves.
func TestBenchMeasuresEveryFigure(t *testing.T) {
	ctx := context.Background()
	status, out, errOut := cli(ctx, "bench", "--json", "--allow-root-jobs", "--data", t.TempDir(), "--raw-for", "200ms",
		"--jobs", "20", "--submit-jobs", "300", "--latency-jobs", "5", "--read-jobs", "10")
	if status != 0 {
		t.Fatalf("exit %d: %s", status, errOut)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	figures := map[string]float64{"raw spawn": r.RawSpawnPerSec, "raw job": r.RawJobPerSec, "pipeline": r.PipelinePerSec,
		"pipeline ratio": r.PipelineRatio, "cpu per job": r.CPUPerJobMicros, "latency": r.LatencyP50Millis,
		"raw job latency": r.RawJobP50Millis, "submit": r.SubmitPerSec, "bulk submit": r.BulkSubmitPerSec,
		"raw appends": r.RawAppendPerSec, "replay": r.ReplayPerSec, "raw consume": r.RawConsumePerSec,
		"job read": r.Reads.JobP50, "events read": r.Reads.EventsP50, "direct get": r.Reads.GetP50, "rss": r.RSSMiB,
		"events stored per job": r.Ops.Stored, "deliveries per job": r.Ops.Delivered}
	for name, v := range figures {
		if v <= 0 {
			t.Errorf("%s: %v, not measured", name, v)
		}
	}
	if r.LogJobs != 25 || r.ReplayEvents < r.LogEvents || len(r.Skipped) != 2 { // a late event may follow the catch-up
		t.Errorf("log of %d jobs, %d events, replayed %d; skipped %v", r.LogJobs, r.LogEvents, r.ReplayEvents, r.Skipped)
	}

	status, out, errOut = cli(ctx, "bench", "--json", "--allow-root-jobs", "--data", t.TempDir(), "--scale", "300", "--read-jobs", "10")
	if status != 0 {
		t.Fatalf("--scale: exit %d: %s", status, errOut)
	}
	r = benchResult{}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.LogJobs != 300 || r.LogEvents < 300*6 || r.ReplayEvents != r.LogEvents || r.Reads.JobP50 <= 0 || r.RSSMiB <= 0 {
		t.Errorf("--scale 300: %+v", r)
	}
}
