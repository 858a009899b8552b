package recache

import (
	"errors"
	"testing"
)

func TestCompileOnceAndRefuse(t *testing.T) {
	var c Cache
	a, err := c.Compile(`^(\d+)$`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Compile(`^(\d+)$`)
	if a != b {
		t.Fatal("the same pattern was compiled twice")
	}
	if _, err := c.Compile(""); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty pattern: %v", err)
	}
	if _, err := c.Compile(`(`); err == nil {
		t.Fatal("an invalid pattern compiled")
	}
}
