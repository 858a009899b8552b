package events

import (
	"encoding/json"
	"reflect"
	"testing"
)

// fastTypes are the payloads fastPayload reads, each a fresh value.
var fastTypes = []func() any{
	func() any { return &TransferData{} }, func() any { return &StartedData{} }, func() any { return &StatusData{} },
	func() any { return &ExitedData{} }, func() any { return &StagedOutData{} }, func() any { return &EndData{} },
	func() any { return &Note{} }, func() any { return &RestartedData{} }, func() any { return &IncarnatedData{} },
	func() any { return &Job{} },
}

// checkPayload holds Payload (fastPayload, else encoding/json over what it wrote) to
// encoding/json alone: the same value, and an error exactly when encoding/json has one.
func checkPayload(t *testing.T, data []byte, fresh func() any) bool {
	t.Helper()
	want, got := fresh(), fresh()
	wantErr := json.Unmarshal(data, want)
	fast := fastPayload(data, got)
	if fast && wantErr != nil {
		t.Fatalf("%T: fastPayload read %q, which encoding/json refuses: %v", got, data, wantErr)
	}
	err := Event{Data: data}.Payload(got)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%T: Payload %v, encoding/json %v, on %q", got, err, wantErr, data)
	}
	if wantErr == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%T: %q read as %+v (fast %v), encoding/json %+v", got, data, got, fast, want)
	}
	return fast
}

// The payloads of every recorded history (a projection's reduced ones among them) and
// plain and odd payloads of each type read as encoding/json reads them; the plain ones
// without it.
func TestFastPayloadMatchesJSON(t *testing.T) {
	plain := map[int][]string{
		0: {`{"direction":"in","from":"a","to":"b","attempt":1,"of":2,"bytes":-5,"duration":1234567890123,"error":"x","directory":true,"files":0,"permanent":false,"backoff":9}`},
		1: {`{"cluster":"c1","host":"h","host_key":"SHA256:x","native_id":"42","native_state":"R","running":true,"adopted":false,"executor":"e"}`},
		2: {`{"state":"RUNNING","native_state":"R"}`, `{ "state" : "HELD" , "native_state":"café"}`},
		3: {`{"exit_code":-1,"reason":"killed"}`, `{"exit_code":0}`},
		4: {`{"ok":true,"files":3,"reason":"r"}`},
		5: {`{"exit_code":3,"reason":"exit"}`, `{}`},
		6: {`{"reason":"r","action":"HOLD","output":"o","unknown":[1,{"a":null}]}`},
		7: {`{"attempt":2,"of":3,"reason":"crashed"}`},
		8: {`{"cluster":"local","queue":"q"}`, `{"cluster":"local"}`, `{"cluster":"c","scripts":null,"storages":{}}`,
			`{"cluster":"local","lrms":"Fork","profile":"fork","profile_hash":"ab","work_dir":"/w/J","host":"h",` +
				`"scripts":{"JOB":{"body":"#!/bin/sh\nset -e\necho \"hi\" \\ \u00e9\t\/ \b\f\r\u0000 é","sha256":"x"},` +
				`"START":{"sha256":"y","location":"/bin/s"}},"native_id_pattern":"^(\\d+)$","status_pattern":"(?P<id>\\S+)",` +
				`"native_states":{"R":"RUNNING","PD":"QUEUED"},"absent_state":"ENDED","static_scripts":{},` +
				`"substituted":{"arguments.0":"a/b"},"storages":{"USPACE":"/w/J","\u00e9":"\ud83d\ude00x"}}`},
		9: {`{"id":"J","name":"n","kind":"group","parent":"P","submitter":"s","restarts":2,"original":{"path":"job[1]"},"dds":{"collection_path":"main/c_1"}}`,
			`{"id":"J","dds":{}}`, `{"id":"J","original":{}}`,
			`{"id":"J","submitter":"s","idempotency_key":"k","original":{"format":"v3-json","content_type":"application/json",` +
				`"file":"/tmp/t.json","sha256":"02","bytes":"eyJ2ZXJzaW9uIjozfQo=","index":2},"executable":"/bin/sh",` +
				`"arguments":["-c","echo \"a\"\n",""],"environment":[{"name":"A","value":"x=y"},{"name":"B","value":""}],` +
				`"directory":"d","library_path":[],"stdin":"in","stdout":["o1","o2"],"stderr":["e"],"count":4,"mpi":true,` +
				`"job_type":"mpi","default_storage_base":"/s","max_transfer_attempts":3,"cleanup":["c"],"substitutions":["taskid"],` +
				`"children":["C1","C2"],"requirements":{"lrms_default":"batch","queue":"q","os_name":"Linux","ram_size":1024,` +
				`"origins":{"lrms_default":{"field":"requirements.fork (not set)"},"queue":{"field":"q","line":3,"col":7}}}}`,
			`{"id":"J","original":{"format":"v3-json","bytes":""},"requirements":{}}`,
			`{"id":"J","parent":"P","original":{"format":"dds","index":3,"path":"main/g/c_1/t_2"},"executable":"/bin/sh",` +
				`"dds":{"topology":"t","task_path":"main/g/c_1/t_2","task_id":"42","task_index":2,"collection_index":-1,` +
				`"task_name":"t","group_name":"g","collection_name":"c","collection_path":"main/g/c_1","exe":"x.sh",` +
				`"exe_reachable":true,"env_script":"e.sh","env_reachable":false,"properties":[{"name":"p","access":"write"},` +
				`{"name":"q","scope":"collection"}],"assets":[{"name":"a","type":"inline","visibility":"task","value":"v\n"}],` +
				`"vars":{"n":"1"}}}`,
			`{"id":"J","stage_in":[{"from":"http://h/a","to":"a","attempts":3},{"from":"s/","to":"d","directory":true}],` +
				`"stage_out":[{"from":"o","to":"file:///x","when":"success"}],"max_transfer_attempts":2}`,
			`{"id":"J","original":{"format":"jrdl"},"requirements":{"lrms_default":"any"},"requirements":{"queue":"q"}}`,
			`{"id":"J","kind":"group","child_range":{"first":"01M8JD6N7S9A7Y8NTZ56ZRP6HK","count":1000},` +
				`"start_time":"2026-11-29T04:00:00Z","start_before":"2026-11-29T05:00:00.5+01:00","duration":7200000000000,` +
				`"start_within":"PT1H","walltime":"P1DT2H3M4.5S","limits":[{"resource":"cpu_time","value":60},{"resource":"file_size","value":0}],"coallocation":{"group":1,"size":3,"contact":"c",` +
				`"job_manager":"pbs","total_count":12,"on_sibling_end":"continue"},"application":{"name":"gauss","version":"16",` +
				`"variation":"a"},"fields":{"F":"v"},"extra":{"x":"y\n"}}`,
			`{"id":"J","requirements":{"host_names":[{"any_of":[{"pattern":"n*"},{"pattern":"^a$","syntax":"regexp"}],` +
				`"from":{"field":"hostname","line":4}}],"target_names":[{"any_of":[]}],"lrms_rules":[{"is":"Slurm",` +
				`"from":{"field":"lrms"}},{"is_not":"Fork"}],"software":[{"name":"gcc","op":">=","version":"12",` +
				`"from":{"field":"sw","col":2}}],"placement":{"together":"k","spread":"s","index":2,"max_per_host":1,` +
				`"from":{"field":"p"}},"unsupported":[{"what":"w","from":{"field":"u"}}]}}`,
			`{"id":"J","dds":{"task_index":0,"collection_index":0,"requirements":[{"name":"r","type":"hostname","value":"h*"},` +
				`{"type":"wnname","value":"w"}],"triggers":[{"name":"t","condition":"TaskCrashed","action":"RestartTask","arg":"3"}]}}`},
	}
	for k, fresh := range fastTypes {
		for _, data := range plain[k] {
			if !checkPayload(t, []byte(data), fresh) {
				t.Errorf("%T: %s was not read plainly", fresh(), data)
			}
		}
		for _, odd := range []string{
			`{"reason":"a\"b"}`, `{"reason":null}`, `{"REASON":"x"}`, `{"reason":"x","Reason":"y"}`, `{"reas\u006fn":"x"}`,
			`{"attempt":1.0}`, `{"attempt":1e2}`, `{"attempt":"1"}`, `{"attempt":01}`, `{"attempt":-0}`,
			`{"attempt":123456789012345678901}`, `{"exit_code":9223372036854775807}`, `{"exit_code":null}`,
			`{"exit_code":1,"exit_code":null}`, `{"running":"true"}`, `{"ok":1}`, `{"state":5}`, `{"cluster":["a"]}`,
			`{"failed":["a"],"cleaned":[]}`, `{"group":{"children":2}}`, `{"scripts":{"START":{"sha256":"x"}}}`,
			`{"original":{"path":"p","format":"v3-json"}}`, `{"original":{"bytes":"aGk="}}`, `{"dds":null}`,
			`{"dds":{"collection_path":"a","task_index":1}}`, `{"requirements":{}}`, `{"executable":"/bin/true"}`,
			`{"id":"J","original":{"path":"a"},"original":{"path":"b"}}`, `{"name":"\xff"}`, `{"name":"caf\xc3\xa9"}`,
			`{"kſnd":"x"}`, `{"reason":"x",}`, `{"reason":"x"} x`, `{"reason":"x"`, `[]`, `null`, ``, ` {} `, `{"":1}`,
			`{"scripts":null}`, `{"scripts":{"A":null}}`, `{"scripts":{"A":{"Body":"x"}}}`, `{"scripts":{"A":{"body":"x","extra":[1,{}]}}}`,
			`{"scripts":{"A":{"body":"x"},"A":{"sha256":"y"}}}`, `{"storages":{"a":"x"},"storages":{"b":"y"}}`,
			`{"storages":{"a":"\ud800"}}`, `{"storages":{"a":"\udc00\ud800"}}`, `{"storages":{"a":"\xff"}}`,
			`{"storages":{"a":null}}`, `{"native_states":{"R":1}}`, `{"substituted":{"a":"b",}}`, `{"storages":{"a":"x"}`,
			`{"work_dir":"\u0000\u001f"}`, `{"host":"a\/b\'"}`, `{"host":"a\x"}`, `{"Scripts":{}}`, `{"scripts":[]}`,
			`{"original":{"bytes":"!!"}}`, `{"original":{"bytes":"aGk"}}`, `{"original":{"bytes":"aG\nk="}}`, `{"original":{"bytes":null}}`,
			`{"arguments":null}`, `{"arguments":[1]}`, `{"arguments":["a",]}`, `{"arguments":["a"],"arguments":[]}`,
			`{"dds":{"requirements":[]}}`, `{"dds":{"triggers":[{}]}}`, `{"dds":{"properties":[{"name":"p","x":1}]}}`,
			`{"dds":{"assets":[null]}}`, `{"dds":{"vars":{"a":1}}}`, `{"dds":{"task_index":"1"}}`, `{"dds":{"exe":"a"},"dds":{"task_id":"b"}}`,
			`{"stage_in":[{"from":"a","to":"b","x":1}]}`, `{"stage_in":[{"from":"a"}],"stage_in":[]}`, `{"stage_out":[{"when":null}]}`,
			`{"environment":[{"name":"A","extra":1}]}`, `{"limits":[{"resource":"cpu_time","value":"60"}]}`, `{"limits":[{"value":1.5}]}`, `{"environment":[{"Name":"A"}]}`, `{"environment":[null]}`,
			`{"requirements":{"hosts":["h"]}}`, `{"requirements":{"lrms":"Slurm"}}`, `{"requirements":{"fork":false}}`,
			`{"requirements":{"resources":{"minFreeCPU":"2"}}}`, `{"requirements":{"lrms_rules":[]}}`,
			`{"requirements":{"origins":{"a":{"field":"f","x":1}}}}`, `{"requirements":{"origins":null}}`,
			`{"original":{"format":"v3-yaml"},"requirements":{}}`, `{"requirements":{},"original":{"format":"v3-json"}}`,
			`{"requirements":{"ram_size":1.5}}`, `{"requirements":null}`, `{"count":true}`, `{"mpi":"true"}`,
			`{"child_range":null}`, `{"child_range":{"first":"a"},"child_range":{"count":2}}`, `{"child_range":{"count":"2"}}`,
			`{"start_time":"2026-11-29T04:00:00"}`, `{"start_time":"2026-11-29 04:00:00Z"}`, `{"start_time":null}`,
			`{"start_time":"2026-11-29T04:00:00\u005a"}`, `{"start_time":1}`, `{"start_time":"2026-11-29T24:00:00Z"}`,
			`{"duration":1.5}`, `{"duration":"1h"}`, `{"walltime":"P1X"}`, `{"walltime":"-P1Y2M"}`, `{"walltime":5}`,
			`{"walltime":"P\u0031D"}`, `{"start_within":null}`, `{"coallocation":{"group":1,"size":2,"x":1}}`,
			`{"coallocation":{"group":1},"coallocation":{"size":2}}`, `{"application":{"name":"a","Name":"b"}}`,
			`{"fields":{"a":1}}`, `{"fields":null}`, `{"extra":{"a":"b"},"extra":{"c":"d"}}`, `{"extra":{"a":null}}`,
			`{"requirements":{"host_names":[{"any_of":null}]}}`, `{"requirements":{"host_names":[{"any_of":[{"pattern":"a","x":1}]}]}}`,
			`{"requirements":{"lrms_rules":[{"is":"a","from":{"field":"f"},"from":{"line":2}}]}}`,
			`{"requirements":{"lrms_rules":[{"from":null}]}}`, `{"requirements":{"placement":null}}`,
			`{"requirements":{"placement":{"index":"1"}}}`, `{"requirements":{"attributes":[{"name":"a","at_least":1.5}]}}`,
			`{"requirements":{"software":[{"name":"a"}],"software":[]}}`, `{"requirements":{"unsupported":[{}]}}`,
			`{"dds":{"requirements":[{"name":"r","type":"t","value":"v","x":1}]}}`, `{"dds":{"triggers":null}}`,
			`{"dds":{"triggers":[{"condition":"c","action":"a"}],"triggers":[{"arg":"x"}]}}`,
			`{"environment":[{"name":"A"}],"environment":[{"value":"b"}]}`, `{"arguments":["a","b"],"arguments":["c"]}`,
			`{"stage_in":[{"from":"a","to":"b"}],"stage_in":[{"attempts":2}]}`, `{"environment":[],"environment":[{"name":"A"}]}`,
		} {
			checkPayload(t, []byte(odd), fresh)
		}
	}
	for _, m := range recordedMessages(t) {
		e, err := Decode(m.Event)
		if err != nil {
			t.Fatal(err)
		}
		for _, fresh := range fastTypes {
			if reflect.TypeOf(fresh()) == reflect.TypeOf(NewPayload(e.Name)) {
				checkPayload(t, e.Data, fresh)
			}
		}
	}
}

// FuzzFastPayload: Payload reads every payload of every type fastPayload knows as
// encoding/json does.
func FuzzFastPayload(f *testing.F) {
	f.Add([]byte(`{"direction":"in","attempt":1,"bytes":5,"directory":true}`), uint8(0))
	f.Add([]byte(`{"exit_code":3,"reason":"exit"}`), uint8(5))
	f.Add([]byte(`{"id":"J","kind":"group","original":{"path":"p"},"dds":{"collection_path":"c"}}`), uint8(9))
	f.Add([]byte(`{"id":"J","original":{"format":"v3-json","bytes":"aGk="},"executable":"/bin/true","arguments":["a"],`+
		`"environment":[{"name":"A","value":"b"}],"requirements":{"lrms_default":"batch","origins":{"lrms_default":{"field":"f"}}}}`), uint8(9))
	f.Add([]byte(`{"cluster":"local","queue":"q","scripts":{}}`), uint8(8))
	f.Add([]byte(`{"scripts":{"JOB":{"body":"a\nb\u00e9\ud83d\ude00","sha256":"x"}},"storages":{"a":"b"}}`), uint8(8))
	f.Fuzz(func(t *testing.T, data []byte, k uint8) {
		checkPayload(t, data, fastTypes[int(k)%len(fastTypes)])
	})
}

// BenchmarkIncarnatedPayload decodes every recorded incarnation (rendered scripts and
// all) as a fold does (Payload), beside encoding/json alone in the same run.
func BenchmarkIncarnatedPayload(b *testing.B) {
	benchPayload(b, recordedPayloads(b, Incarnated), func() *IncarnatedData { return new(IncarnatedData) })
}

// BenchmarkJobPayload decodes every recorded submitted job as a fold does, beside
// encoding/json alone (Job.UnmarshalJSON) in the same run; v3 is the job gridwire bench
// submits, {"version":3,"executable":"/bin/true"}, as ingest writes it.
func BenchmarkJobPayload(b *testing.B) {
	b.Run("recorded", func(b *testing.B) { benchPayload(b, recordedPayloads(b, Submitted), func() *Job { return new(Job) }) })
	v3 := []byte(`{"id":"01M8JD6N7S9A7Y8NTZ56ZRP6HK","submitter":"bench","original":{"format":"v3-json",` +
		`"content_type":"application/json","file":"bench.json","sha256":"0245e77b1971eeba747c406ad5cc8a52f96eb5921876e9db76cba3e51c9f0cc2",` +
		`"bytes":"eyJ2ZXJzaW9uIjozLCJleGVjdXRhYmxlIjoiL2Jpbi90cnVlIn0K"},"executable":"/bin/true","requirements":` +
		`{"lrms_default":"batch","origins":{"lrms_default":{"field":"requirements.fork (not set)"}}}}`)
	b.Run("v3", func(b *testing.B) { benchPayload(b, [][]byte{v3}, func() *Job { return new(Job) }) })
}

// recordedPayloads are the payloads of every recorded event of the name.
func recordedPayloads(b *testing.B, name Name) [][]byte {
	var payloads [][]byte
	for _, m := range recordedMessages(b) {
		if e, err := Decode(m.Event); err == nil && e.Name == name {
			payloads = append(payloads, e.Data)
		}
	}
	if len(payloads) == 0 {
		b.Fatalf("no recorded %s payload", name)
	}
	return payloads
}

func benchPayload[T any](b *testing.B, payloads [][]byte, fresh func() *T) {
	for _, bc := range []struct {
		name   string
		decode func([]byte, *T) error
	}{
		{"payload", func(d []byte, v *T) error { return Event{Data: d}.Payload(v) }},
		{"encoding-json", func(d []byte, v *T) error { return json.Unmarshal(d, v) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := bc.decode(payloads[i%len(payloads)], fresh()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
