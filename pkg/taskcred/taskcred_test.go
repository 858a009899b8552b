package taskcred_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/taskcred"
)

func TestIssueVerify(t *testing.T) {
	k, err := taskcred.New([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := taskcred.New([]byte(strings.Repeat("o", 32)))
	tok := k.Issue("01JOB")
	if id, err := k.Verify(tok); err != nil || id != "01JOB" {
		t.Fatalf("Verify(own) = %q, %v", id, err)
	}
	forged := strings.Replace(tok, "01JOB", "01JOC", 1)
	for name, bad := range map[string]string{"other key": other.Issue("01JOB"), "other job": forged, "empty": "",
		"no prefix": strings.TrimPrefix(tok, "gwt1."), "cut": tok[:len(tok)-3], "not base64": "gwt1.01JOB.***"} {
		if _, err := k.Verify(bad); !errors.Is(err, taskcred.ErrBadToken) {
			t.Errorf("%s: Verify = %v, want ErrBadToken", name, err)
		}
	}
	if _, err := taskcred.New([]byte("short")); err == nil {
		t.Fatal("a 5-byte key accepted")
	}
}

// Every process opening the key gets the same one: what one issues another verifies.
func TestOpenSharesOneKey(t *testing.T) {
	b, err := bus.Open(context.Background(), bus.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	k1, err := taskcred.Open(context.Background(), b.JS, 1)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := taskcred.Open(context.Background(), b.JS, 1)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := k2.Verify(k1.Issue("01JOB")); err != nil || id != "01JOB" {
		t.Fatalf("a second Open verifies the first's credential as %q, %v", id, err)
	}
}
