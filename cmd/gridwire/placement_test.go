package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlacementFromEachLanguage runs descriptions in every language through ingest and
// the incarnator together (`gridwire render`): ingest turns each language's requirements
// into canonical ones and the incarnator places the job by those alone, with refusals
// naming the description's own field and line.
func TestPlacementFromEachLanguage(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(cfg, []byte(`clusters:
- name: local
  kind: fork
  profile: fork
  lrms: Fork
- name: hpc
  kind: ssh
  hosts: [login1.hpc.example.org]
  known_hosts: /dev/null
  profile: slurm
  lrms: Slurm
  queues: [batch]
  work_root: /scratch
  info: {cpu_hz: 2600000000, ram_size: 262144, attributes: {ram_available: "100000", gpus: "4"}}
`), 0o600)
	jrdl := func(body string) string {
		return `<jrdl><job><executable><path><stringElement value="/bin/true"/></path></executable>` + body + `</job></jrdl>`
	}
	dds := func(decl string) string {
		return `<topology name="t">` + decl + `<decltask name="a"><exe>/bin/true</exe><requirements><name>r</name></requirements></decltask><main name="main"><task>a</task></main></topology>`
	}
	cases := []struct {
		name, file, doc string
		want            string // "cluster X" or a refusal's text
	}{
		{"v3 without fork prefers a batch system", "a.json", `{"version":3,"executable":"/bin/true"}`, "cluster hpc"},
		{"v3 fork: true may take Fork", "b.json", `{"version":3,"executable":"/bin/true","requirements":{"fork":true}}`, "cluster local"},
		{"v3 lrms Fork", "c.yaml", "version: 3\nexecutable: /bin/true\nrequirements: {lrms: fork}\n", "cluster local"},
		{"v3 ram_size in MB", "d.json", `{"version":3,"executable":"/bin/true","requirements":{"fork":true,"ram_size":300000}}`,
			"hpc: requirements.ram_size (line 1): the job needs at least 300000, the cluster has 262144"},
		{"JRDL takes any LRMS", "e.xml", jrdl(``), "cluster local"},
		{"JRDL schedulingType scheduler", "f.xml", jrdl(`<resource><schedulingType><string><stringElement value="scheduler"/></string></schedulingType></resource>`), "cluster hpc"},
		{"JRDL clockSpeed in MHz", "g.xml", jrdl(`<resource><processor><clockSpeed><integer value="3000"/></clockSpeed></processor></resource>`),
			"hpc: job[0]/resource/processor/clockSpeed (line 1): the job needs at least 3000000000, the cluster has 2600000000"},
		{"JRDL minRAMAvailable", "h.xml", jrdl(`<resource><minMainMemory><minRAMAvailable><integer value="1000"/></minRAMAvailable></minMainMemory></resource>`), "cluster hpc"},
		{"DDS hostname, the +. form", "i.xml", dds(`<declrequirement name="r" type="hostname" value="+.example.org"/>`), "cluster hpc"},
		{"DDS gpu", "j.xml", dds(`<declrequirement name="r" type="gpu" value="8"/>`),
			"hpc: topology/declrequirement[r] (line 1): the job needs at least 8, the cluster has 4"},
		// DDS's scheduler accepts custom requirements unread; the first cluster takes it.
		{"DDS custom", "k.xml", dds(`<declrequirement name="r" type="custom" value="x"/>`), "cluster local"},
		{"DDS groupname", "l.xml", dds(`<declrequirement name="r" type="groupname" value="g1"/>`),
			`hpc: topology/declrequirement[r] (line 1): requirement type groupname ("g1") names a group of DDS agents`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			job := filepath.Join(dir, c.file)
			os.WriteFile(job, []byte(c.doc), 0o600)
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{"render", "--config", cfg, "--data", dir, "--script", "none", job},
				func(string) string { return "" }, &out, &errOut)
			var ec exitCode
			if strings.HasPrefix(c.want, "cluster ") {
				if err != nil || !strings.Contains(out.String(), ": "+c.want+",") {
					t.Fatalf("%v: want %s\n%s%s", err, c.want, out.String(), errOut.String())
				}
				return
			}
			if !errors.As(err, &ec) || !strings.Contains(out.String(), c.want) {
				t.Fatalf("%v: want a refusal with %q\n%s", err, c.want, out.String())
			}
		})
	}
}
