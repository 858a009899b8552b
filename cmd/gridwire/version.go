package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); otherwise the
// module's version from the build info, "(devel)" for a build from a checkout.
var version string

// versionInfo is what `gridwire version` prints and GET /v1/version serves.
type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"commit_time,omitempty"`
	Modified bool   `json:"modified,omitempty"` // built from a checkout with changes
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if v.Version == "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (v versionInfo) String() string {
	s := v.Version
	if v.Commit != "" {
		s += " (" + v.Commit[:min(12, len(v.Commit))]
		if v.Modified {
			s += ", modified"
		}
		if v.Time != "" {
			s += ", " + v.Time
		}
		s += ")"
	}
	return s + " " + v.Go + " " + v.Platform
}

// serveVersion is GET /v1/version.
func serveVersion(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(buildVersion())
}

func versionCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print this program's version, and the server's when it can be reached",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mine := buildVersion()
			var server *versionInfo
			var serverErr error
			if !clientOnly {
				server, serverErr = serverVersion(cmd.Context(), f)
			}
			if f.json {
				out := map[string]any{"client": mine}
				if server != nil {
					out["server"] = server
				}
				return json.NewEncoder(e.stdout).Encode(out)
			}
			fmt.Fprintf(e.stdout, "client  %s\n", mine)
			switch {
			case server != nil:
				fmt.Fprintf(e.stdout, "server  %s\n", server)
			case serverErr != nil:
				fmt.Fprintf(e.stdout, "server  not reached: %v\n", serverErr)
			}
			return nil
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().BoolVar(&clientOnly, "client", false, "only this program's version; do not ask the server")
	return cmd
}

// serverVersion asks the server once, briefly: a version never waits on a server.
func serverVersion(ctx context.Context, f *clientFlags) (*versionInfo, error) {
	base, err := serverURL(f.server)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := &client{base: base, token: f.token, http: &http.Client{}, retries: 1}
	var v versionInfo
	if err := c.do(ctx, http.MethodGet, "/v1/version", nil, "", &v); err != nil {
		return nil, err
	}
	return &v, nil
}
