package target

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/gridwire/gridwire/pkg/shellquote"
)

// Static is one of a profile's static scripts: the file its scripts run, kept at an
// absolute Location on the target. The location carries a hash of the body, so a file
// found there is the right one and is never rewritten.
type Static struct {
	Name     string // the profile's name for it, for errors
	Location string
	Body     string
}

// ErrStatic marks a static script that cannot be installed as given.
var ErrStatic = errors.New("target: static script cannot be installed")

// InstallExit is the exit status of a script whose install of a static script failed.
const InstallExit = 97

// InstallScript is shell text that installs every one of statics missing on the host
// where it runs, and exits InstallExit, naming the script on its standard error, when it
// cannot. A script that is there costs one test and no process; a missing one is written
// beside its location under a name of this shell's own (two hosts' installers may race)
// and renamed into place, mode 0700, its directories made 0700 where missing. It is
// meant to head a larger script (a status call, a start) or to run alone.
func InstallScript(statics []Static) (string, error) {
	sorted := append([]Static(nil), statics...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Location < sorted[j].Location })
	var b strings.Builder
	for _, s := range sorted {
		if err := s.check(); err != nil {
			return "", err
		}
		loc := shellquote.Quote(s.Location)
		tmp := loc + ".tmp-$$"
		fmt.Fprintf(&b, "[ -f %s ] || ( umask 077 && mkdir -p %s && printf '%%s' %s >%s && chmod 700 %s && mv -f %s %s ) ||\n"+
			"  { echo %s >&2; exit %d; }\n",
			loc, shellquote.Quote(path.Dir(s.Location)), shellquote.Quote(s.Body), tmp, tmp, tmp, loc,
			shellquote.Quote("cannot install static script "+s.Name+" at "+s.Location), InstallExit)
	}
	return b.String(), nil
}

// check refuses what a shell script cannot carry or would put in the wrong place.
func (s Static) check() error {
	switch {
	case !path.IsAbs(s.Location):
		return fmt.Errorf("%w: %s has no absolute location (%q)", ErrStatic, s.Name, s.Location)
	case strings.IndexByte(s.Location+s.Body+s.Name, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte, which a shell script cannot carry", ErrStatic, s.Name)
	}
	return nil
}
