package readside

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// The page listens to the event stream by event name (SSE's `event:` field), so an event
// its list lacks never reaches it: a session's topology update, say, would leave the
// page stale. Its list is every event gridwire defines.
func TestWebPageFollowsEveryEvent(t *testing.T) {
	js, err := webFiles.ReadFile("web/app.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)const EVENT_NAMES = \[(.*?)\];`).FindSubmatch(js)
	if m == nil {
		t.Fatal("app.js has no EVENT_NAMES list")
	}
	var page []string
	for _, q := range regexp.MustCompile(`"([a-z_]+)"`).FindAllSubmatch(m[1], -1) {
		page = append(page, string(q[1]))
	}
	var want []string
	for _, n := range events.Names() {
		want = append(want, string(n))
	}
	slices.Sort(page)
	slices.Sort(want)
	if !slices.Equal(page, want) {
		t.Errorf("app.js follows %s\nevents.Names() is %s", strings.Join(page, ","), strings.Join(want, ","))
	}
}
