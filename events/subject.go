package events

import (
	"fmt"
	"strings"
)

// Stream names and subject patterns, paired with the templates that fill them
// (the nats-server habit: JSApiStreamCreate / JSApiStreamCreateT).
const (
	// Stream is the JetStream stream that holds every job event.
	Stream = "JOBS"
	// SubjectAll matches every job event.
	SubjectAll = "jobs.>"
	// SubjectEventT is jobs.<jobID>.<event>.<route>; route is a cluster name or NoRoute.
	SubjectEventT = "jobs.%s.%s.%s"
	// SubjectJobT matches every event of one job: jobs.<jobID>.>.
	SubjectJobT = "jobs.%s.>"
	// SubjectTypeT matches one event name on any job and one route: jobs.*.<event>.<route>.
	SubjectTypeT = "jobs.*.%s.%s"
	// NoRoute is the route token of events not addressed to a cluster.
	NoRoute = "_"
	// SubjectHintT is a core-NATS (not stored) subject on which services nudge each other
	// to look at a job sooner than their next poll: gridwire.hint.<kind>.<route>.
	SubjectHintT = "gridwire.hint.%s.%s"
)

// Subject is the subject an event of the given name for a job is stored under.
func Subject(jobID string, name Name, route string) string {
	if route == "" {
		route = NoRoute
	}
	return fmt.Sprintf(SubjectEventT, jobID, name, route)
}

// JobFilter is the subject filter matching every event of one job.
func JobFilter(jobID string) string { return fmt.Sprintf(SubjectJobT, jobID) }

// TypeFilter matches events of one name on every job; route "" matches every route.
func TypeFilter(name Name, route string) string {
	if route == "" {
		route = "*"
	}
	return fmt.Sprintf(SubjectTypeT, name, route)
}

// HintSubject is the core-NATS subject for a hint of the given kind to one route.
func HintSubject(kind, route string) string {
	if route == "" {
		route = NoRoute
	}
	return fmt.Sprintf(SubjectHintT, kind, route)
}

// ParseSubject splits a stored subject into job ID, event name and route.
func ParseSubject(subject string) (jobID string, name Name, route string, err error) {
	parts := strings.Split(subject, ".")
	if len(parts) != 4 || parts[0] != "jobs" {
		return "", "", "", fmt.Errorf("%w: %q", ErrBadSubject, subject)
	}
	return parts[1], Name(parts[2]), parts[3], nil
}

// ValidRoute reports whether s may be used as a route token (a cluster name).
func ValidRoute(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
		if !ok {
			return false
		}
	}
	return true
}
