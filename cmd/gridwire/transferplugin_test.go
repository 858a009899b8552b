package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/pkg/classad"
)

// gridwire transfer-plugin keeps the stager's plugin contract: -classad says what it
// serves in a ClassAd the stager accepts; a transfer it cannot make is a result ClassAd
// that says why (not retryable for a URL it does not serve) and a failing exit status.
func TestTransferPluginCommandKeepsTheContract(t *testing.T) {
	ctx := context.Background()
	out, _, err := runCLI(ctx, "transfer-plugin", "globus-url-copy", "-classad")
	if err != nil {
		t.Fatal(err)
	}
	ads, err := classad.Parse([]byte(out))
	if err != nil || len(ads) != 1 {
		t.Fatalf("-classad printed %q (%v)", out, err)
	}
	multi, _ := ads[0].Bool("MultipleFileSupport")
	typ, _ := ads[0].String("PluginType")
	methods, _ := ads[0].String("SupportedMethods")
	if !multi || typ != "FileTransfer" || methods != "gsiftp,ftp,sshftp" {
		t.Errorf("-classad: %s", ads[0].Format())
	}

	dir := t.TempDir()
	in, res := filepath.Join(dir, "in.ad"), filepath.Join(dir, "out.ad")
	req := classad.Ad{{Name: "Url", Value: "https://example.org/x"}, {Name: "LocalFileName", Value: filepath.Join(dir, "x")}}
	if err := os.WriteFile(in, []byte(req.Format()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(ctx, "transfer-plugin", "globus-url-copy", "-infile", in, "-outfile", res); err == nil {
		t.Error("a failed transfer exited 0")
	}
	data, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	results, err := classad.Parse(data)
	if err != nil || len(results) != 1 {
		t.Fatalf("results %q (%v)", data, err)
	}
	ok, _ := results[0].Bool("TransferSuccess")
	retry, set := results[0].Bool("TransferRetryable")
	msg, _ := results[0].String("TransferError")
	url, _ := results[0].String("TransferUrl")
	if ok || !set || retry || !strings.Contains(msg, "is not a gsiftp,ftp,sshftp URL") || url != "https://example.org/x" {
		t.Errorf("result %s", results[0].Format())
	}
	if _, _, err := runCLI(ctx, "transfer-plugin", "rsync", "-classad"); err == nil {
		t.Error("an unknown tool was accepted")
	}
}
