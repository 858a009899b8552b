package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Retention is how long an ended job's working directory is kept on its cluster before
// the executor removes it (the profile's DELETE). A cluster without one keeps every
// directory; 0 removes it as soon as the job has ended (after its stage-out).
type Retention struct {
	After time.Duration
}

// UnmarshalYAML reads a Go duration ("36h", "90s"), a whole number of days ("7d") or 0,
// and refuses anything else, or a negative one, with its line.
func (r *Retention) UnmarshalYAML(node *yaml.Node) error {
	const want = "a duration such as 36h, a number of days such as 7d, or 0"
	if node.Kind != yaml.ScalarNode {
		return &fieldError{line: node.Line, msg: "a list or mapping is not " + want}
	}
	d, err := parseRetention(node.Value)
	if err != nil {
		return &fieldError{line: node.Line, msg: fmt.Sprintf("%q: %v (%s)", node.Value, err, want)}
	}
	r.After = d
	return nil
}

// MarshalYAML writes the retention back in a form UnmarshalYAML reads.
func (r Retention) MarshalYAML() (any, error) { return r.After.String(), nil }

func parseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("not a whole number of days")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("negative")
	}
	return d, nil
}
