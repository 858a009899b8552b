package taskdesc

import "testing"

func TestParseConstraint(t *testing.T) {
	good := map[string][3]string{
		"mvapich":         {"mvapich", "", ""},
		"abinit > 6":      {"abinit", ">", "6"},
		"orca==2.6.35":    {"orca", "==", "2.6.35"},
		"gcc<=9":          {"gcc", "<=", "9"},
		"x >=1.0-rc2":     {"x", ">=", "1.0-rc2"},
		"y\t<\t2":         {"y", "<", "2"},
		"python3.11 > 3.": {"python3.11", ">", "3."},
	}
	for in, want := range good {
		c, ok := parseConstraint(in)
		if !ok || c.Name != want[0] || c.Op != want[1] || c.Version != want[2] {
			t.Errorf("parseConstraint(%q) = %+v, %v", in, c, ok)
		}
	}
	for _, in := range []string{"", "a b", "a = 1", "a != 1", "a =< 1", "a >", "> 1", "a > 1 2", "a >> 1", "a<=>1"} {
		if c, ok := parseConstraint(in); ok {
			t.Errorf("parseConstraint(%q) accepted: %+v", in, c)
		}
	}
}

func TestResolve(t *testing.T) {
	cases := []struct{ base, ref, want string }{
		{"gsiftp://example.org/my/", "files/hello.txt", "gsiftp://example.org/my/files/hello.txt"},
		{"gsiftp://example.org/my/", "/bar.txt", "gsiftp://example.org/bar.txt"},
		{"gsiftp://example.org/my/", "../bar.txt", "gsiftp://example.org/bar.txt"},
		{"gsiftp://example.org/my", "x", "gsiftp://example.org/x"},
		{"gsiftp://example.org", "x", "gsiftp://example.org/x"},
		{"gsiftp://h/a/b/", "../../../x", "gsiftp://h/x"},
		{"gsiftp://h/a/", "d/./e/..", "gsiftp://h/a/d/"},
		{"gsiftp://h/{taskid}/", "out/{taskid}", "gsiftp://h/{taskid}/out/{taskid}"},
		{"file:/data/", "x", "file:/data/x"},
		{"https://h/a/?q=1#f", "x", "https://h/a/x"},
	}
	for _, c := range cases {
		if got := Resolve(c.base, c.ref); got != c.want {
			t.Errorf("Resolve(%q, %q) = %q, want %q", c.base, c.ref, got, c.want)
		}
	}
}
