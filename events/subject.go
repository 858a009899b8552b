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
	// SubjectAll matches every job event (a stream or consumer filter).
	SubjectAll = "jobs.>"
	// SubjectEvent matches every stored job event token by token (a core-NATS
	// subscription that sees each append); SubjectEventT fills it.
	SubjectEvent = "jobs.*.*.*"
	// SubjectEventT is jobs.<jobID>.<event>.<route>; route is a cluster name or NoRoute.
	SubjectEventT = "jobs.%s.%s.%s"
	// SubjectJob matches every event of any one job; SubjectJobT fills it for one job.
	SubjectJob = "jobs.*.>"
	// SubjectJobT matches every event of one job: jobs.<jobID>.>.
	SubjectJobT = "jobs.%s.>"
	// SubjectTypeT matches one event name on any job and one route: jobs.*.<event>.<route>.
	SubjectTypeT = "jobs.*.%s.%s"
	// NoRoute is the route token of events not addressed to a cluster.
	NoRoute = "_"
	// RouteGroup is the route token of a parent record's submitted event, so the one
	// service that decides a group's state can follow parents without reading every
	// child's submission (a parent with no children ends at once). Routes name clusters
	// only on the events that hand work to a cluster; a submitted event is never one.
	RouteGroup = "group"
	// SubjectHint matches every hint; SubjectHintT fills it.
	SubjectHint = "gridwire.hint.*.*"
	// SubjectHintT is a core-NATS (not stored) subject on which services nudge each other
	// to look at a job sooner than their next poll: gridwire.hint.<kind>.<route>.
	SubjectHintT = "gridwire.hint.%s.%s"

	// SubjectSubmit is the core-NATS request subject for submissions, answered by one
	// ingest process of a queue group: the body is the document, headers carry its name,
	// content type and format.
	SubjectSubmit = "gridwire.api.submit"
	// SubjectExternal is the core-NATS request subject on which other systems publish job
	// events into gridwire, as with POST /v1/events, answered by one ingest process of a
	// queue group. The request carries the structured CloudEvent as its data and the
	// bearer token in an Authorization header.
	SubjectExternal = "gridwire.api.events"

	// SubjectKVT is where a JetStream KV bucket stores a key: $KV.<bucket>.<key> (the KV
	// wire format of JetStream), so a projection's rows can be written with asynchronous
	// publishes instead of one round trip each.
	SubjectKVT = "$KV.%s.%s"
)

// jobsToken is the first token of every job event's subject; jobsPrefix adds its dot.
const (
	jobsToken  = "jobs"
	jobsPrefix = jobsToken + "."
)

// Subject is the subject an event of the given name for a job is stored under.
func Subject(jobID string, name Name, route string) string {
	if route == "" {
		route = NoRoute
	}
	// SubjectEventT filled by concatenation: one allocation, where Sprintf took three
	// and its formatting state (TestSubjectMatchesTemplates).
	return jobsPrefix + jobID + "." + string(name) + "." + route
}

// JobFilter is the subject filter matching every event of one job (SubjectJobT filled).
func JobFilter(jobID string) string { return jobsPrefix + jobID + ".>" }

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

// KVSubject is the subject a KV bucket stores key under.
func KVSubject(bucket, key string) string { return fmt.Sprintf(SubjectKVT, bucket, key) }

// JobOfSubject is the job ID token of a job event's subject, without allocating; false
// when the subject is not under SubjectAll.
func JobOfSubject(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, jobsPrefix)
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, ".")
	return id, ok && id != ""
}

// RouteOfSubject is the route token of a stored subject; NoRoute when the subject is not
// a stored event's (jobs.<jobID>.<event>.<route>).
func RouteOfSubject(subject string) string {
	_, _, route, err := ParseSubject(subject)
	if err != nil {
		return NoRoute
	}
	return route
}

// ParseSubject splits a stored subject into job ID, event name and route.
func ParseSubject(subject string) (jobID string, name Name, route string, err error) {
	parts := strings.Split(subject, ".")
	if len(parts) != 4 || parts[0] != jobsToken {
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
