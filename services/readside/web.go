package readside

import (
	"embed"
	"io/fs"
	"net/http"
)

// webFiles is the web page: plain HTML, CSS and JavaScript, no build step.
//
//go:embed web
var webFiles embed.FS

// webRoutes serves the page at / (the job table; /?job=ID is one job's timeline) and
// its assets under /ui/.
func webRoutes(mux *http.ServeMux) {
	assets, _ := fs.Sub(webFiles, "web")
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, assets, "index.html")
	})
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(assets)))
}
