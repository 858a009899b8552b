package events

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// errSlowPath says a body is not in the exact shape Store writes; Decode reads it with the
// CloudEvents SDK instead, which accepts every valid CloudEvent.
var errSlowPath = errors.New("events: body needs the full decoder")

// Decode parses a stored structured-mode CloudEvent and sets its Hash. It does not set
// Seq or Subject (DecodeStored does).
//
// Bodies in the shape Store writes (flat string attributes, JSON data) are read by a
// small scanner: a replay reads every event of the stream, and the SDK's decoder costs
// several times the fold itself. Anything else goes through the SDK, which judges every
// other spelling. Both paths give the same Event (TestFastDecodeMatchesSDK and
// FuzzFastDecode hold them to it).
func Decode(body []byte) (Event, error) {
	e, err := decodeBody(body)
	if err != nil {
		return Event{}, err
	}
	e.Hash = HashOf(body)
	return e, nil
}

// DecodeStored decodes a message read from the stream, with its sequence, subject and
// route. It leaves Hash empty: a fold does not need it, and hashing costs as much as
// decoding; HashOf(body) gives it to the reader that shows it. On error the Event
// still carries seq and subject, so the caller can say which message it left out.
func DecodeStored(body []byte, subject string, seq uint64) (Event, error) {
	e, err := decodeBody(body)
	if err != nil {
		return Event{Seq: seq, Subject: subject}, err
	}
	e.Seq, e.Subject = seq, subject
	if route := RouteOfSubject(subject); route != NoRoute {
		e.Route = route
	}
	return e, nil
}

// DecodeFold decodes a stored message for a fold of job state, as DecodeStored does, but
// keeps of the envelope only what Apply reads (the name, job, ID, time, data and route):
// the source, principal, chain (prevhash, prevseq) and signature are checked as
// DecodeStored checks them and left empty. It accepts and refuses exactly the bodies
// DecodeStored accepts and refuses (TestDecodeFoldMatchesDecodeStored, FuzzDecodeFold).
//
// A replay folds every event of the log; the strings Apply never reads were half of what
// decoding an envelope allocated. When the body's subject is the job token of subject,
// JobID shares subject's bytes.
func DecodeFold(body []byte, subject string, seq uint64) (Event, error) {
	e, _, err := DecodeFoldJSON(body, subject, seq)
	return e, err
}

// DecodeFoldJSON is DecodeFold, and also reports whether the decoder read the event's
// data as JSON and checked it against json.Valid's grammar (JSONValueEnd), as it does for
// every body in the layout Store writes ("data", not data_base64). A fold that walks the
// data again, as the job table's does the large payloads, may then skip what it does
// not keep instead of checking it a second time.
func DecodeFoldJSON(body []byte, subject string, seq uint64) (Event, bool, error) {
	l := lean{subject: subject}
	e, err := scanFields(body, &l)
	if err != nil {
		if e, err = DecodeStored(body, subject, seq); err != nil {
			return e, false, err
		}
		e.Source, e.Principal, e.PrevHash, e.PrevSeq, e.Signer, e.Signature = "", "", "", 0, "", ""
		return e, false, nil
	}
	e.Seq, e.Subject, e.PrevSeq = seq, subject, 0 // prevseq checked, not kept
	if route, ok := routeOf(subject); ok && route != NoRoute {
		e.Route = route
	}
	return e, l.checkedJSON, nil
}

// routeOf is RouteOfSubject without its allocations: the fourth of exactly four
// dot-separated tokens when the first is "jobs".
func routeOf(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, jobsToken+".")
	if !ok {
		return "", false
	}
	dots := 0
	for i := 0; i < len(rest); i++ {
		if rest[i] == '.' {
			if dots++; dots == 2 {
				route := rest[i+1:]
				return route, strings.IndexByte(route, '.') < 0
			}
		}
	}
	return "", false
}

// lean says what a scan keeps: everything (nil), or what a fold reads, with the stored
// subject whose job token the job ID may share.
type lean struct {
	subject     string
	checkedJSON bool // the data was read as JSON (its "data" member) and checked
}

// jobID is the job ID val as a string, sharing the subject's bytes when it is the
// subject's job token (what JobOfSubject reads: jobs.<val>., val not empty and without a
// dot), which it is for every event a store wrote.
func (l *lean) jobID(val []byte) string {
	n := len(jobsPrefix) + len(val)
	if len(val) > 0 && len(l.subject) > n && l.subject[n] == '.' && strings.HasPrefix(l.subject, jobsPrefix) &&
		l.subject[len(jobsPrefix):n] == string(val) && bytes.IndexByte(val, '.') < 0 {
		return l.subject[len(jobsPrefix):n]
	}
	return string(val)
}

// decodeBody is the one decoder: the fast path, else the SDK. Hash is left empty.
func decodeBody(body []byte) (Event, error) {
	if e, err := scanEnvelope(body); err == nil {
		return e, nil
	}
	return decodeSDK(body)
}

// envelope holds the attributes the decoder checks but does not keep, as raw bytes.
type envelope struct {
	spec, ctype, typ, tm, prevseq, source []byte
	hasPrevseq                            bool
}

// scanEnvelope reads a structured-mode CloudEvent whose attributes are all strings and
// whose data is a JSON object or array ("data", as Encode writes it) or base64
// ("data_base64", as every body was written before). Either way Data is the bytes as
// written: signatures cover them.
func scanEnvelope(b []byte) (Event, error) { return scanFields(b, nil) }

// scanFields is scanEnvelope; with l set it keeps only what a fold reads (see
// DecodeFold), and checks the rest as it would keep it.
func scanFields(b []byte, l *lean) (Event, error) {
	var e Event
	var env envelope
	var haveData bool
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return e, errSlowPath
	}
	i = skipSpace(b, i+1)
	for first := true; ; first = false {
		if i < len(b) && b[i] == '}' && first {
			i++
			break
		}
		key, j, err := scanString(b, i)
		if err != nil {
			return e, err
		}
		j = skipSpace(b, j)
		if j >= len(b) || b[j] != ':' {
			return e, errSlowPath
		}
		j = skipSpace(b, j+1)
		switch string(key) {
		case "data_base64":
			val, end, err := scanString(b, j)
			if err != nil {
				return e, err
			}
			data := make([]byte, base64.StdEncoding.DecodedLen(len(val)))
			n, err := base64.StdEncoding.Decode(data, val)
			if err != nil {
				return e, errSlowPath
			}
			e.Data, haveData, j = json.RawMessage(data[:n:n]), true, end
			if l != nil {
				l.checkedJSON = false
			}
		case "data":
			// Data as Encode writes it now: a JSON object or array, kept as written (it
			// shares the body's bytes). Bodies written before hold it in data_base64.
			if j >= len(b) || b[j] != '{' && b[j] != '[' {
				return e, errSlowPath
			}
			end, ok := JSONValueEnd(b, j)
			if !ok || !jsonData(b[j:end]) { // nested deeper than the SDK reads
				return e, errSlowPath
			}
			e.Data, haveData, j = json.RawMessage(b[j:end:end]), true, end
			if l != nil {
				l.checkedJSON = true
			}
		default:
			val, end, err := scanString(b, j)
			if err != nil {
				return e, err
			}
			if !setAttr(&e, &env, key, val, l) {
				return e, errSlowPath
			}
			j = end
		}
		j = skipSpace(b, j)
		if j < len(b) && b[j] == ',' {
			i = skipSpace(b, j+1)
			continue
		}
		if j < len(b) && b[j] == '}' {
			i = j + 1
			break
		}
		return e, errSlowPath
	}
	if skipSpace(b, i) != len(b) || !haveData {
		return e, errSlowPath
	}
	return finishEnvelope(e, env)
}

// setAttr keeps one string attribute: in the event, or in env when only checked (all but
// what a fold reads when l is set).
func setAttr(e *Event, env *envelope, key, val []byte, l *lean) bool {
	switch string(key) {
	case "specversion":
		env.spec = val
	case "id":
		e.ID = string(val)
	case "source":
		if env.source = val; l == nil {
			e.Source = string(val)
		}
	case "type":
		env.typ = val
	case "subject":
		if l != nil {
			e.JobID = l.jobID(val)
		} else {
			e.JobID = string(val)
		}
	case "datacontenttype":
		env.ctype = val
	case "time":
		env.tm = val
	case ExtPrevSeq:
		env.prevseq, env.hasPrevseq = val, true
	case ExtPrevHash, ExtPrincipal, ExtSigner, ExtSignature:
		if l == nil {
			setExtension(e, key, val)
		}
	default:
		return false
	}
	return true
}

// setExtension keeps a string extension a fold does not read.
func setExtension(e *Event, key, val []byte) {
	switch string(key) {
	case ExtPrevHash:
		e.PrevHash = string(val)
	case ExtPrincipal:
		e.Principal = string(val)
	case ExtSigner:
		e.Signer = string(val)
	case ExtSignature:
		e.Signature = string(val)
	}
}

func finishEnvelope(e Event, env envelope) (Event, error) {
	if string(env.spec) != "1.0" || string(env.ctype) != "application/json" || e.ID == "" || len(env.source) == 0 ||
		e.JobID == "" || len(env.tm) == 0 || !plainSource(env.source) {
		return e, errSlowPath
	}
	if e.Name = typeNames[string(env.typ)]; e.Name == "" {
		return e, errSlowPath
	}
	// Only the exact form the SDK writes: other spellings are the SDK's to judge.
	t, ok := parseTime(env.tm)
	if !ok {
		return e, errSlowPath
	}
	e.Time = t
	if env.hasPrevseq {
		if e.PrevSeq = parseSeq(env.prevseq); e.PrevSeq == 0 {
			return e, errSlowPath
		}
	}
	return e, nil
}

// plainSource reports whether the SDK keeps a source exactly as written: a URI
// reference that url.Parse reads back unchanged. Sources of letters, digits and / . _ ~ -
// always are; any other is checked by a round trip.
func plainSource[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '/' || c == '.' || c == '_' || c == '~' || c == '-') {
			u, err := url.Parse(string(s))
			return err == nil && u.String() == string(s)
		}
	}
	return true
}

// typeNames maps the CloudEvents type of every known event name, at its current version,
// to the name; any other type (an older version goes to the slow path, which upcasts it)
// is not in it.
var typeNames = func() map[string]Name {
	m := make(map[string]Name, len(names))
	for _, n := range names {
		m[n.Type()] = n
	}
	return m
}()

// parseTime reads a time in the one form the SDK writes it: RFC 3339 in UTC ("Z"), with
// the fraction of a second trimmed of trailing zeros (none at all for a whole second),
// what time.Parse(time.RFC3339Nano) reads in UTC and AppendFormat writes back byte for
// byte. It is that round trip without its cost (TestParseTimeMatchesRoundTrip,
// FuzzParseTime).
func parseTime(b []byte) (time.Time, bool) {
	// 2006-01-02T15:04:05Z, with .999999999 before the Z.
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[len(b)-1] != 'Z' {
		return time.Time{}, false
	}
	year, ok1 := decimal(b[0:4])
	month, ok2 := decimal(b[5:7])
	day, ok3 := decimal(b[8:10])
	hour, ok4 := decimal(b[11:13])
	minute, ok5 := decimal(b[14:16])
	sec, ok6 := decimal(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 ||
		day > daysIn(time.Month(month), year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		// A dot, then 1-9 digits, the last not 0.
		if len(frac) < 2 || len(frac) > 10 || frac[0] != '.' || frac[len(frac)-1] == '0' {
			return time.Time{}, false
		}
		n, ok := decimal(frac[1:])
		if !ok {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			n *= 10
		}
		nsec = n
	}
	days := daysSinceEpoch(year, month, day)
	return time.Unix(days*86400+int64(hour*3600+minute*60+sec), int64(nsec)).UTC(), true
}

// daysSinceEpoch is the number of days from 1970-01-01 to a date of the proleptic
// Gregorian calendar (what time.Date counts with), negative before it: the days of
// whole 400-year eras from March of year 0, then of the era's years (Howard Hinnant's
// days_from_civil). time.Date normalises and looks up its zone, twice the cost of the
// rest of a fold's time.
func daysSinceEpoch(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400                     // [0, 399]
	mp := int64((month + 9) % 12)          // March = 0
	doy := (153*mp+2)/5 + int64(day) - 1   // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return era*146097 + doe - 719468
}

// decimal is the decimal number b spells, all of its bytes digits.
func decimal(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// daysIn is the number of days of month m of year y.
func daysIn(m time.Month, y int) int {
	switch m {
	case time.February:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

// parseSeq reads a decimal sequence without sign or leading zero; 0 when malformed.
func parseSeq(b []byte) uint64 {
	if len(b) == 0 || len(b) > 19 || b[0] == '0' {
		return 0
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// specialBytes marks (with its high bit) each byte of a little-endian word of eight that
// is a quote, a backslash or a control character (below 0x20). A marked byte may be
// followed by falsely marked ones (a borrow runs upward, from a byte that is special),
// but the lowest marked byte is always the first special one, and a word without a
// special byte has no mark (a byte that is 0x80 or above never borrows).
func specialBytes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^(ones*'"'), w^(ones*'\\')
	return ((quote-ones)&^quote | (backslash-ones)&^backslash | (w-ones*0x20)&^w) & highs
}

// firstSpecial returns the index of the first quote, backslash or control character in
// b[i:], reading eight bytes at a time, or len(b) when there is none.
func firstSpecial(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := specialBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && plainInString[b[i]] {
		i++
	}
	return i
}

// scanString reads a JSON string at b[i] without escapes (an escape is rare in gridwire's
// attributes and goes to the slow path); it returns the string's bytes.
func scanString(b []byte, i int) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, errSlowPath
	}
	// One pass: find the end, and gather every byte before it to tell whether the string
	// is ASCII (UTF-8 needs checking only past it).
	j, words := i+1, uint64(0)
	for ; j+8 <= len(b); j += 8 {
		w := binary.LittleEndian.Uint64(b[j:])
		if m := specialBytes(w); m != 0 {
			n := bits.TrailingZeros64(m) >> 3
			words |= w & (1<<(8*n) - 1)
			j += n
			break
		}
		words |= w
	}
	for ; j < len(b) && plainInString[b[j]]; j++ {
		words |= uint64(b[j])
	}
	if j >= len(b) || b[j] != '"' {
		return nil, j, errSlowPath // an escape, a control character or no end
	}
	if words&0x8080808080808080 != 0 && !utf8.Valid(b[i+1:j]) {
		return nil, j, errSlowPath
	}
	return b[i+1 : j], j + 1, nil
}
