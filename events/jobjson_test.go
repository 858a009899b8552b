package events

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestMarshalJobMatchesJSON: MarshalJob writes what json.Marshal writes, byte for byte,
// for jobs with every field of every type a Job reaches filled at random (a field added
// to any of them and not to the writer makes json.Marshal's bytes differ), with nil and
// empty lists and maps, strings that need each kind of escape, times in odd zones and
// out of range, and floats at the edges of encoding/json's formats; and the same error
// when json.Marshal refuses a job.
func TestMarshalJobMatchesJSON(t *testing.T) {
	for seed := range int64(3000) {
		j := randomJob(rand.New(rand.NewSource(seed)), "")
		checkMarshalJob(t, &j, seed)
	}
}

// TestMarshalJobReachesEveryField: the random jobs above do set every field of every
// struct type below Job to a non-zero value at some seed, so the comparison covers it.
func TestMarshalJobReachesEveryField(t *testing.T) {
	set := map[string]bool{}
	for seed := range int64(300) {
		j := randomJob(rand.New(rand.NewSource(seed)), "")
		markSet(reflect.ValueOf(j), set)
	}
	var missing []string
	for _, f := range structFields(reflect.TypeFor[Job](), map[reflect.Type]bool{}) {
		if !set[f] {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("never set by randomJob: %s", strings.Join(missing, ", "))
	}
}

// TestMarshalJobRecorded: every submitted job of the recorded replay fixtures (as the
// decoder reads it, upcast to today's fields) encodes as json.Marshal encodes it.
func TestMarshalJobRecorded(t *testing.T) {
	n := 0
	eachRecordedBody(t, func(file string, i int, body []byte) {
		e, err := Decode(body)
		if err != nil {
			t.Fatalf("%s:%d: %v", file, i+1, err)
		}
		if e.Name != Submitted {
			return
		}
		var j Job
		if err := e.Payload(&j); err != nil {
			t.Fatal(err)
		}
		checkMarshalJob(t, &j, int64(i))
		n++
	})
	if n < 10 {
		t.Fatalf("only %d submitted jobs in the fixtures", n)
	}
}

// TestNewEncodesJobsAsJSON: events.New writes a Job payload, by pointer or by value,
// as json.Marshal does.
func TestNewEncodesJobsAsJSON(t *testing.T) {
	var j Job
	var want []byte
	for seed := int64(0); want == nil; seed++ { // the first random job json.Marshal takes
		j = randomJob(rand.New(rand.NewSource(seed)), "")
		want, _ = json.Marshal(&j)
	}
	for _, p := range []any{&j, j} {
		e, err := New("J1", Submitted, "", time.Now(), p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e.Data, want) {
			t.Fatalf("New(%T) data\n%s\nwant\n%s", p, e.Data, want)
		}
	}
}

// FuzzMarshalJob: for a job decoded from the fuzzer's JSON, and for a random job built
// from its seed with its string planted in every string field, MarshalJob and
// json.Marshal agree.
func FuzzMarshalJob(f *testing.F) {
	f.Add([]byte(`{"id":"J","executable":"/bin/true","requirements":{}}`), int64(1), "a<b>&\u2028\x00\xff")
	f.Add([]byte(`{"id":"J","start_time":"2026-01-02T03:04:05.5+05:30","start_within":"P1M","requirements":{"attributes":[{"name":"x","at_least":1e-7}],"origins":{"q":{"field":"f","line":2}}},"dds":{"task_index":1,"collection_index":-1,"vars":{"b":"1","a":"2"}}}`), int64(2), "")
	f.Add([]byte(`{"id":"J","requirements":{"host_names":[{"any_of":null},{"any_of":[]}]},"original":{"bytes":"AAEC"}}`), int64(3), "\t\n\r\b\f\x7f")
	f.Fuzz(func(t *testing.T, doc []byte, seed int64, s string) {
		var j Job
		if json.Unmarshal(doc, &j) == nil {
			checkMarshalJob(t, &j, seed)
		}
		j = randomJob(rand.New(rand.NewSource(seed)), s)
		checkMarshalJob(t, &j, seed)
	})
}

func checkMarshalJob(t *testing.T, j *Job, seed int64) {
	t.Helper()
	want, wantErr := json.Marshal(j)
	got, err := MarshalJob(j)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("seed %d: error %v, json.Marshal's %v", seed, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("seed %d: MarshalJob wrote\n%s\njson.Marshal\n%s", seed, got, want)
	}
}

// randomJob fills a Job by reflection: every field of every struct type below it, so a
// field added anywhere is filled too. plant, when not empty, is one of the strings used.
func randomJob(r *rand.Rand, plant string) Job {
	var j Job
	fill(r, reflect.ValueOf(&j).Elem(), plant, 0)
	return j
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	bytesType = reflect.TypeFor[[]byte]()
)

// nasty strings: each kind of escape encoding/json makes, and bytes it leaves alone.
var nasty = []string{"", "plain", "/bin/true", `q"b\s`, "<a href='x'>&amp;</a>", "\x00\x01\x1f\x7f",
	"\b\f\n\r\t", "é ü 日本", "\u2028\u2029", "\xff\xfe bad \xc3", "\xe2\x80", "{taskid}", "a\u00a0b\u0085"}

func jobString(r *rand.Rand, plant string) string {
	if plant != "" && r.Intn(3) == 0 {
		return plant
	}
	s := nasty[r.Intn(len(nasty))]
	if r.Intn(4) == 0 {
		s += nasty[r.Intn(len(nasty))]
	}
	return s
}

func fill(r *rand.Rand, v reflect.Value, plant string, depth int) {
	t := v.Type()
	switch {
	case t == timeType:
		v.Set(reflect.ValueOf(randomTime(r)))
		return
	case t == bytesType:
		if n := r.Intn(4); n > 0 {
			b := make([]byte, n*7)
			r.Read(b)
			v.SetBytes(b)
		} else if r.Intn(2) == 0 {
			v.SetBytes([]byte{})
		}
		return
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(jobString(r, plant))
	case reflect.Bool:
		v.SetBool(r.Intn(2) == 0)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(randomInt(r))
	case reflect.Float64:
		v.SetFloat(randomFloat(r))
	case reflect.Pointer:
		if r.Intn(3) > 0 {
			p := reflect.New(t.Elem())
			fill(r, p.Elem(), plant, depth+1)
			v.Set(p)
		}
	case reflect.Slice:
		switch n := r.Intn(5); n {
		case 0: // nil
		case 1:
			v.Set(reflect.MakeSlice(t, 0, 0))
		default:
			s := reflect.MakeSlice(t, n-1, n-1)
			for i := range n - 1 {
				fill(r, s.Index(i), plant, depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		switch n := r.Intn(5); n {
		case 0:
		case 1:
			v.Set(reflect.MakeMap(t))
		default:
			m := reflect.MakeMap(t)
			for range n {
				k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
				fill(r, k, plant, depth+1)
				fill(r, e, plant, depth+1)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() && r.Intn(4) > 0 {
				fill(r, v.Field(i), plant, depth+1)
			}
		}
	default:
		panic("randomJob: no filler for " + t.String())
	}
}

func randomInt(r *rand.Rand) int64 {
	switch r.Intn(5) {
	case 0:
		return 0
	case 1:
		return -r.Int63n(1000)
	case 2:
		return math.MaxInt64 - r.Int63n(2)
	}
	return r.Int63n(100000)
}

func randomFloat(r *rand.Rand) float64 {
	edges := []float64{0, math.Copysign(0, -1), 1e-6, 1e-7, 9.99999e-7, 1e21, 9.99e20, 1e-300, 1.5, -2.25e30,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789.125}
	switch r.Intn(10) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1 - 2*r.Intn(2))
	case 2, 3, 4:
		return edges[r.Intn(len(edges))]
	}
	return (r.Float64() - 0.5) * math.Pow(10, float64(r.Intn(50)-25))
}

func randomTime(r *rand.Rand) time.Time {
	zones := []*time.Location{time.UTC, time.FixedZone("IST", 5*3600+1800), time.FixedZone("odd", -(3*3600 + 17*60 + 9)),
		time.FixedZone("far", 25*3600), time.FixedZone("", 0)}
	sec := r.Int63n(400 * 365 * 86400)
	if r.Intn(20) == 0 {
		sec = -sec * 100 // before year 0: json.Marshal refuses it
	}
	return time.Unix(sec, r.Int63n(2)*r.Int63n(1e9)).In(zones[r.Intn(len(zones))])
}

// markSet records the fields (as Type.Field) v holds non-zero, at any depth.
func markSet(v reflect.Value, set map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			markSet(v.Elem(), set)
		}
	case reflect.Slice:
		if v.Type() != bytesType {
			for i := range v.Len() {
				markSet(v.Index(i), set)
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			markSet(it.Value(), set)
		}
	case reflect.Struct:
		if v.Type() == timeType {
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if !v.Field(i).IsZero() {
				set[v.Type().Name()+"."+f.Name] = true
			}
			markSet(v.Field(i), set)
		}
	}
}

// structFields lists Type.Field for every exported field of every struct type reachable
// from t (time.Time aside).
func structFields(t reflect.Type, seen map[reflect.Type]bool) []string {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		return structFields(t.Elem(), seen)
	case reflect.Struct:
		if seen[t] || t == timeType {
			return nil
		}
		seen[t] = true
		var out []string
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				out = append(out, t.Name()+"."+f.Name)
				out = append(out, structFields(f.Type, seen)...)
			}
		}
		return out
	}
	return nil
}

// BenchmarkMarshalJob encodes the small v3 job of a bulk submission (what ingest makes
// of {"version":3,"executable":"/bin/true"}) and a DDS instance's job, with MarshalJob
// and with json.Marshal, the yardstick.
func BenchmarkMarshalJob(b *testing.B) {
	small := Job{ID: NewID(), Submitter: "bench", Executable: "/bin/true",
		Original: Original{Format: "v3-json", File: "bench.json", SHA256: strings.Repeat("ab", 32),
			Bytes: []byte(`{"version":3,"executable":"/bin/true"}`)},
		Requirements: Requirements{LRMSDefault: LRMSBatch,
			Origins: map[string]Origin{"lrms_default": {Field: "requirements.fork (not set)"}}}}
	dds := Job{ID: NewID(), Name: "main/workers_7/chain_7/processor_14", Parent: NewID(), Submitter: "bench",
		Executable: "/opt/bin/processor", Arguments: []string{"--id", "14"}, Substitutions: []string{"session", "dds_location"},
		Original: Original{Format: "dds", File: "big.xml", SHA256: strings.Repeat("ab", 32), Index: 29, Path: "main/workers_7/chain_7/processor_14"},
		DDS: &DDSContext{Topology: "big", TaskPath: "main/workers_7/chain_7/processor_14", TaskID: "1234567890123456789", TaskIndex: 14,
			CollectionIndex: 7, TaskName: "processor", GroupName: "workers", CollectionName: "chain", CollectionPath: "main/workers_7/chain_7",
			Exe: "/opt/bin/processor --id 14", ExeReachable: true, Properties: []DDSProperty{{Name: "port", Access: "read"}}},
		Environment: []EnvVar{{Name: "DDS_TASK_PATH", Value: "main/workers_7/chain_7/processor_14"}, {Name: "DDS_GROUP_NAME", Value: "workers"},
			{Name: "DDS_SESSION_ID", Value: "{session}"}, {Name: "DDS_LOCATION", Value: "{dds_location}"}}}
	for _, c := range []struct {
		name string
		job  *Job
	}{{"small", &small}, {"dds", &dds}} {
		for _, enc := range []struct {
			name string
			f    func(*Job) ([]byte, error)
		}{{"direct", MarshalJob}, {"json.Marshal", func(j *Job) ([]byte, error) { return json.Marshal(j) }}} {
			b.Run(c.name+"/"+enc.name, func(b *testing.B) {
				b.ReportAllocs()
				start := cpuTime()
				for b.Loop() {
					if _, err := enc.f(c.job); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
