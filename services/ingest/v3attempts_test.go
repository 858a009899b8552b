package ingest

import (
	"fmt"
	"testing"
)

// v3's max_transfer_attempts counts retries of a failing transfer: 0 is one attempt and
// no retry, n is n+1 attempts, for the job and every file it stages.
func TestV3MaxTransferAttemptsCountsRetries(t *testing.T) {
	for retries, attempts := range map[int]int{0: 1, 1: 2, 4: 5} {
		doc := fmt.Sprintf(`{"version": 3, "executable": "a", "default_storage_base": "https://h/d/",
			"max_transfer_attempts": %d, "input_files": {"in": "in"}, "output_files": {"out": "out"}}`, retries)
		jobs, err := Parse("t.json", []byte(doc), ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		j := jobs[0]
		if j.MaxTransferAttempts != attempts || j.StageIn[0].Attempts != attempts || j.StageOut[0].Attempts != attempts {
			t.Errorf("max_transfer_attempts %d: job %d, in %d, out %d attempts; want %d",
				retries, j.MaxTransferAttempts, j.StageIn[0].Attempts, j.StageOut[0].Attempts, attempts)
		}
	}
}
