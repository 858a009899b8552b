package ingest

import (
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// TestJRDLExecutableURLIsStaged: an executable given as a URL is staged in under its file
// name and that file is run (the stager marks a staged file the job runs executable; the
// incarnator runs it as ./name). Before, the URL itself was exec'd and exited 127.
func TestJRDLExecutableURLIsStaged(t *testing.T) {
	jobs, err := Parse("doc", []byte(`<jrdl><job><executable><path><stringElement value="gsiftp://ip/path/file"/></path></executable>
<fileStageIn><fileInputArray><fileInput><url><urlElement value="http://h/data"/></url><path><stringElement value="data"/></path></fileInput></fileInputArray></fileStageIn>
</job></jrdl>`), ParseOptions{Format: FormatJRDL})
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[0]
	want := []events.FileCopy{{From: "http://h/data", To: "data"}, {From: "gsiftp://ip/path/file", To: "file"}}
	if j.Executable != "file" || len(j.StageIn) != 2 || j.StageIn[0].From != want[0].From || j.StageIn[1] != want[1] {
		t.Errorf("executable %q stage-in %+v", j.Executable, j.StageIn)
	}
	_, err = Parse("doc", []byte(`<jrdl><job><executable><path><stringElement value="http://h/"/></path></executable></job></jrdl>`), ParseOptions{Format: FormatJRDL})
	if err == nil || !strings.Contains(err.Error(), "job[0]/executable") || !strings.Contains(err.Error(), "without a file name") {
		t.Errorf("a URL without a file name: %v", err)
	}
}
