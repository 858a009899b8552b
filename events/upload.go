package events

import (
	"fmt"
	"strings"

	"github.com/oklog/ulid/v2"
)

// UploadURL is the gridwire-upload URL of an object of the upload bucket.
func UploadURL(object string) string { return SchemeUpload + "://" + object }

// HasScheme reports whether s starts with "scheme:" in RFC 3986's sense (two or more
// characters, so a Windows drive letter is not a scheme). A name without one is a plain
// path.
func HasScheme(s string) bool {
	i := strings.Index(s, ":")
	if i < 2 {
		return false
	}
	for j, c := range s[:i] {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// CheckUploadName accepts the name of an object of the upload bucket:
// <ULID>/<segment>[/<segment>...], with no empty (but a final one, for a directory), "."
// or ".." segment, and no backslash or control character.
func CheckUploadName(name string) error {
	segs := strings.Split(name, "/")
	if len(segs) < 2 || len(name) > 1024 {
		return fmt.Errorf("%q is not <ULID>/<file>", name)
	}
	if _, err := ulid.ParseStrict(segs[0]); err != nil {
		return fmt.Errorf("%q does not start with a ULID", name)
	}
	if len(segs) > 2 && segs[len(segs)-1] == "" {
		segs = segs[:len(segs)-1] // a directory's name ends in '/'
	}
	for _, s := range segs[1:] {
		if s == "" || s == "." || s == ".." {
			return fmt.Errorf("%q has an empty, . or .. segment", name)
		}
		for _, c := range s {
			if c < 0x20 || c == 0x7f || c == '\\' {
				return fmt.Errorf("%q has a control character or backslash", name)
			}
		}
	}
	return nil
}
