package bus

import (
	"context"
	"net"
	"strings"
	"testing"
)

// A listen address already taken is refused at once (the server itself would only log
// it and never become ready, and the start waits long for a store to recover).
func TestListenAddressTakenIsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Open(context.Background(), Config{DataDir: t.TempDir(), Listen: ln.Addr().String(), User: "u", Password: "p"})
	if err == nil || !strings.Contains(err.Error(), "listening on") {
		t.Fatalf("a taken address: %v", err)
	}
}
