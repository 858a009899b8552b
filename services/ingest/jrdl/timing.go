package jrdl

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// timing reads jobStartTime (xs:dateTime), jobStartBefore and jobDuration (xs:duration).
// jobStartBefore may have years and months (the submission time anchors it when the job
// is submitted); jobDuration may not.
func (d *decoder) timing(el *xmltree.Element, job *events.Job, path string) {
	d.plainAttrs(el, path)
	for _, c := range el.Children {
		d.list.Addf(c.Line, c.Col, path+"/"+c.Name, "unknown element (<%s> holds text)", el.Name)
	}
	text := strings.TrimSpace(el.Text)
	if el.Name == "jobStartTime" {
		t, err := ParseDateTime(text)
		if err != nil {
			d.list.Add(el.Line, el.Col, path, err.Error())
			return
		}
		job.StartTime = &t
		return
	}
	p, err := events.ParsePeriod(text)
	if err != nil {
		d.list.Add(el.Line, el.Col, path, err.Error())
		return
	}
	if p.Negative {
		d.list.Addf(el.Line, el.Col, path, "%q is negative", text)
		return
	}
	if el.Name == "jobStartBefore" {
		job.StartWithin = &p
		return
	}
	fixed, ok := p.Fixed()
	if !ok {
		// A wall time limit is enforced as a number of seconds, by the job script and by
		// the batch system alike; a month has no fixed number.
		d.list.Addf(el.Line, el.Col, path, "%q has years or months, which have no fixed length; give the limit in days or less (P30D, PT720H)", text)
		return
	}
	job.Walltime = &p
	job.Duration = fixed
}

// checkTimes enforces that a start time and a start-before are not both given. Both are
// checked on the merged job, so a subjob cannot add one to its job's other.
func (d *decoder) checkTimes(el *xmltree.Element, job *events.Job, path string) {
	if job.StartTime != nil && job.StartWithin != nil {
		d.list.Add(el.Line, el.Col, path, "jobStartTime and jobStartBefore are mutually exclusive; give one")
	}
}

var dateTime = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})?$`)

// ParseDateTime reads an xs:dateTime, YYYY-MM-DDThh:mm:ss with optional fraction and
// zone (Z or ±hh:mm), checking every component's range. 24:00:00 is the end of the day.
// Without a zone the time is taken as UTC.
func ParseDateTime(s string) (time.Time, error) {
	m := dateTime.FindStringSubmatch(s)
	bad := func(why string) (time.Time, error) {
		return time.Time{}, fmt.Errorf("%q is not an xs:dateTime (YYYY-MM-DDThh:mm:ss[.fff][Z|±hh:mm]): %s", s, why)
	}
	if m == nil {
		return bad("wrong form")
	}
	n := make([]int, 7)
	for i := 1; i <= 6; i++ {
		n[i], _ = strconv.Atoi(m[i])
	}
	year, month, day, hour, minute, sec := n[1], n[2], n[3], n[4], n[5], n[6]
	switch {
	case year == 0:
		return bad("there is no year 0000")
	case month < 1 || month > 12:
		return bad("month out of range")
	case day < 1 || day > daysIn(year, month):
		return bad("day out of range")
	case hour == 24 && (minute != 0 || sec != 0 || strings.Trim(m[7], ".0") != ""):
		return bad("24 is only allowed as 24:00:00")
	case hour > 24 || minute > 59 || sec > 59:
		return bad("time out of range")
	}
	loc := time.UTC
	if z := m[8]; z != "" && z != "Z" {
		hh, _ := strconv.Atoi(z[1:3])
		mm, _ := strconv.Atoi(z[4:6])
		if hh > 14 || mm > 59 || hh == 14 && mm != 0 {
			return bad("zone offset out of range")
		}
		off := hh*3600 + mm*60
		if z[0] == '-' {
			off = -off
		}
		loc = time.FixedZone(z, off)
	}
	nanos := 0
	if f := m[7]; f != "" {
		frac := (f[1:] + "000000000")[:9]
		nanos, _ = strconv.Atoi(frac)
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nanos, loc).UTC(), nil
}

func daysIn(year, month int) int {
	return time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
