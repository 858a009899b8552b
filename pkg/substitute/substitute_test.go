package substitute

import (
	"slices"
	"testing"
)

func TestSubstitute(t *testing.T) {
	vars := map[string]string{"taskid": "117", "queue": "short", "lrms": "PBS", "HOME": "/home/u", "X509_CERT_DIR": "/etc/x"}
	cases := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"out/{taskid}/test.txt", "out/117/test.txt"},
		{"{queue}-{lrms}", "short-PBS"},
		{"{unknown} stays", "{unknown} stays"},
		{"{taskid", "{taskid"},
		{"taskid}", "taskid}"},
		{"{{taskid}}", "{117}"},
		{"{ taskid}", "{ taskid}"},
		{"{1abc}", "{1abc}"},
		{"{}", "{}"},
		{"{HOME}/bin", "/home/u/bin"},
		{"{X509_CERT_DIR}", "/etc/x"},
		{"{Taskid}", "{Taskid}"},
		{"ü{taskid}ü", "ü117ü"},
	}
	for _, c := range cases {
		if got := Substitute(c.in, vars); got != c.want {
			t.Errorf("Substitute(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSubstituteOnePass(t *testing.T) {
	got := Substitute("{a}{b}", map[string]string{"a": "{b}", "b": "x"})
	if got != "{b}x" {
		t.Fatalf("got %q, want one pass", got)
	}
}

func TestNames(t *testing.T) {
	got := Names("{taskid}/{queue}/{taskid}/{no space}/{lrms")
	if want := []string{"taskid", "queue"}; !slices.Equal(got, want) {
		t.Fatalf("Names = %q, want %q", got, want)
	}
}

func FuzzSubstitute(f *testing.F) {
	f.Add("a{taskid}b{queue}{lrms}{x}")
	f.Fuzz(func(t *testing.T, s string) {
		vars := map[string]string{"taskid": "T"}
		out := Substitute(s, vars)
		if Substitute(s, nil) != s {
			t.Fatal("nil vars changed the string")
		}
		for _, n := range Names(out) {
			if n == "taskid" && !slices.Contains(Names(s), "taskid") {
				t.Fatalf("substitution introduced a placeholder: %q -> %q", s, out)
			}
		}
	})
}
