package incarnator

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A replacement name that no field of its template and no special field defines is a
// load error that profiles check reports with file and line, not a refusal of every job.
func TestUndefinedReplacementIsALoadError(t *testing.T) {
	dir := t.TempDir()
	entries, _ := fs.ReadDir(builtinProfiles, "profiles")
	for _, e := range entries {
		data, _ := fs.ReadFile(builtinProfiles, "profiles/"+e.Name())
		os.WriteFile(filepath.Join(dir, e.Name()), data, 0o600)
	}
	if err := CheckProfiles(dir); err != nil {
		t.Fatalf("the shipped profiles: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "typo.xml"), []byte(`<?xml version="1.0"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns:idb="http://gpe.intel.com/idb" name="typo" extends="fork">
  <idb:Template name="JOB_PROLOGUE">
    <idb:Invocation name=""><idb:Body><![CDATA[cd <WORKING_DIRECTROY>]]></idb:Body></idb:Invocation>
  </idb:Template>
</osp:Profile>`), 0o600)
	err := CheckProfiles(dir)
	if err == nil || !strings.Contains(err.Error(), "typo.xml:4:") ||
		!strings.Contains(err.Error(), `template JOB_PROLOGUE variation "" of profile "typo" uses <WORKING_DIRECTROY>, which no field of the template and no special field defines`) {
		t.Errorf("got %v", err)
	}
}
