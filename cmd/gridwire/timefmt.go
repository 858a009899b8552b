package main

import (
	"fmt"
	"time"
)

// clock prints times for people: local time to the second (with how long ago, where a
// moment is shown alone), or with --utc, RFC 3339 in UTC to the millisecond.
type clock struct {
	utc bool
	now time.Time
}

func newClock(utc bool) clock { return clock{utc: utc, now: time.Now()} }

// at is a moment, "" for none.
func (c clock) at(t time.Time) string {
	switch {
	case t.IsZero():
		return ""
	case c.utc:
		return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// atAgo is a moment with its age: "2026-11-23 10:31:02 (3m ago)".
func (c clock) atAgo(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf("%s (%s ago)", c.at(t), age(c.now.Sub(t)))
}

// stamp is an event's time in a table: to the millisecond, since events come fast.
func (c clock) stamp(t time.Time) string {
	switch {
	case t.IsZero():
		return ""
	case c.utc:
		return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return t.Local().Format("2006-01-02 15:04:05.000")
}

// age is a short duration as kubectl shows ages: 45s, 3m, 2h5m, 4d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m != 0 && h < 10 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// span is how long something took, rounded for reading: 820ms, 3.2s, 4m10s.
func span(d time.Duration) string {
	switch {
	case d <= 0:
		return ""
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
