package profile

import (
	"errors"
	"strings"
	"testing"
)

func TestCompileJavaRefusesWhatRE2CannotExpress(t *testing.T) {
	cases := map[string]string{
		`a(?=b)`:            "lookahead",
		`a(?!b)`:            "lookahead",
		`(?<=a)b`:           "lookbehind",
		`(?<!a)b`:           "lookbehind",
		`(a)\1`:             "backreference",
		`(?<x>a)\k<x>`:      "named backreference",
		`(?>ab)`:            "atomic group",
		`a*+`:               "possessive",
		`a++`:               "possessive",
		`a{2}+`:             "possessive",
		`[a-z&&[^aeiou]]`:   "intersection",
		`[a[bc]]`:           "nested character classes",
		`[a-z&&b]`:          "intersection",
		`\Gab`:              "anchor",
		`ab\Z`:              "anchor",
		`\h+`:               "Java class",
		`\R`:                "Java class",
		`(?x) a b`:          "flag (?x)",
		`(?U)\w`:            "flag (?U)",
		`\p{javaLowerCase}`: "invalid character class",
		`(unclosed`:         "missing closing )",
	}
	for src, want := range cases {
		_, err := CompileJava(src)
		if err == nil || !errors.Is(err, ErrRegexp) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an ErrRegexp about %q", src, err, want)
		}
	}
}

func TestCompileJavaAcceptsTheCommonSubset(t *testing.T) {
	for _, src := range []string{
		`\.log`, `^\s*([0-9]+)(?:;\S*)?\s*$`, `(?<id>[0-9]+) (?<state>[A-Z]+)`, `(?i)abc`, `(?m)^x$`,
		`[\[\]]`, `[]a]`, `[^]a]`, `\Qa.b\E`, `a{2,3}?`, `\d+\.\d+`, `[[:alpha:]]`, `\/`, `a|b`,
	} {
		if _, err := CompileJava(src); err != nil && src != `[[:alpha:]]` {
			t.Errorf("%s: %v", src, err)
		}
	}
}

func TestJavaReplacement(t *testing.T) {
	cases := []struct{ re, to, in, want string }{
		{`\.log`, ``, "y.log", "y"},
		{`(\w+)@(\w+)`, `$2 at $1`, "me@host", "host at me"},
		{`(a)`, `\$1`, "a", "$1"},
		{`(a)`, `\\`, "a", `\`},
		{`(?<w>x)`, `[${w}]`, "x", "[x]"},
		// Java reads $12 as group 12 only when the pattern has twelve groups.
		{`(a)`, `$12`, "a", "a2"},
		{`(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)`, `$12`, "abcdefghijkl", "l"},
		{`o`, `0`, "foo", "f00"},
	}
	for _, c := range cases {
		got := expand(t, "<V/"+c.re+"/"+c.to+">", map[string]Value{"V": {Text: c.in, Trusted: true}})
		if got != c.want {
			t.Errorf("<V/%s/%s> on %q: got %q, want %q", c.re, c.to, c.in, got, c.want)
		}
	}
	for _, bad := range []string{`<V/(a)/$2>`, `<V/a/$x>`, `<V/a/${x>`, `<V/a/b\>`} {
		if _, err := ParseText(bad); err == nil && bad != `<V/a/b\>` {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestPlaces(t *testing.T) {
	cases := []struct {
		src  string
		want []PlaceKind
	}{
		{`echo <A>`, []PlaceKind{PlacePlain}},
		{`echo "x<A>y" 'x<B>y' <C>`, []PlaceKind{PlaceDouble, PlaceSingle, PlacePlain}},
		{`x=$(echo <A> "<B>") y="$(echo <C>)"`, []PlaceKind{PlacePlain, PlaceDouble, PlacePlain}},
		{`echo $((<A> + 1)) "$((<B>))"`, []PlaceKind{PlaceArith, PlaceArith}},
		{"echo `<A>`", []PlaceKind{PlaceUnsafe}},
		{`echo ${X:-<A>} "${Y:+<B>}"`, []PlaceKind{PlaceUnsafe, PlaceUnsafe}},
		{"echo <A> # note <B>\necho <C>", []PlaceKind{PlacePlain, PlaceUnsafe, PlacePlain}},
		{"echo a#<A>", []PlaceKind{PlacePlain}},
		{"cat <<EOF\nline <A>\nEOF\necho <B>", []PlaceKind{PlaceUnsafe, PlacePlain}},
		{"cat <<-'E' >f\n\tx <A>\n\tE\necho <B>", []PlaceKind{PlaceUnsafe, PlacePlain}},
		{"cat <<<<A>", []PlaceKind{PlacePlain}},
		{`echo $<A> \<B> "\<C>"`, []PlaceKind{PlaceUnsafe, PlaceUnsafe, PlaceUnsafe}},
		{`echo $'a\'' <A>`, []PlaceKind{PlaceUnsafe}},
		{`x=$(case a in a) echo <A>;; esac)`, []PlaceKind{PlaceUnsafe}},
		{`x=$( (echo <A>) ) "<B>"`, []PlaceKind{PlacePlain, PlaceDouble}},
		{`echo "a\"<A>"`, []PlaceKind{PlaceDouble}},
		{`sort <in >out 2>&1 <A>`, []PlaceKind{PlacePlain}},
	}
	for _, c := range cases {
		txt, err := ParseText(c.src)
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		var got []PlaceKind
		for _, s := range txt.Segs {
			if s.Repl != nil {
				got = append(got, s.Repl.Place.Kind)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%q: places %v, want %v", c.src, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%q: places %v, want %v", c.src, got, c.want)
				break
			}
		}
	}
}

func TestUnclosedText(t *testing.T) {
	for _, src := range []string{`echo 'a`, `echo "a`, `echo $(a`, "echo `a", `echo $((1`, `echo ${a`, "cat <<EOF\nno end"} {
		if _, err := ParseText(src); err == nil {
			t.Errorf("%q: no error", src)
		}
	}
	if _, err := ParseText("echo a # open ' quote in a comment"); err != nil {
		t.Errorf("a comment may hold a quote: %v", err)
	}
}

func TestUntrustedValuesRefusedInUnsafePlaces(t *testing.T) {
	for _, src := range []string{"echo `<A>`", "# <A>", "cat <<E\n<A>\nE", `echo ${X:-<A>}`, `echo $((<A>))`} {
		txt, err := ParseText(src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = txt.AppendExpand(nil, func(string) (Value, error) { return Value{Text: "$(touch pwned)"}, nil })
		var pe *PlacementError
		if !errors.As(err, &pe) {
			t.Errorf("%q: got %v, want a PlacementError", src, err)
		}
		// Trusted (profile or operator) values go anywhere.
		if _, err := txt.AppendExpand(nil, func(string) (Value, error) { return Value{Text: "7", Trusted: true}, nil }); err != nil {
			t.Errorf("%q trusted: %v", src, err)
		}
	}
	txt, _ := ParseText(`echo $((<A> * 2))`)
	out, err := txt.AppendExpand(nil, func(string) (Value, error) { return Value{Text: "21"}, nil })
	if err != nil || string(out) != "echo $((21 * 2))" {
		t.Errorf("an integer may stand in arithmetic: %q %v", out, err)
	}
	txt, _ = ParseText(`echo "<A>"`)
	if _, err := txt.AppendExpand(nil, func(string) (Value, error) { return Value{List: []string{"a", "b"}}, nil }); err == nil {
		t.Error("a list inside double quotes was accepted")
	}
}

func FuzzParseText(f *testing.F) {
	for _, s := range []string{"echo <A>", `cp <S> <D/\.log/>`, "cat <<EOF\n<A>\nEOF", "x=$(case a in a) <A>;; esac)",
		`"<A>" '<B>' $((<C>))`, "`<A>`", `<A/(a)(b)/$2$1>`, "# <A>\n<B>", `$'<A>'`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		txt, err := ParseText(src)
		if err != nil {
			return
		}
		out, err := txt.AppendExpand(nil, func(string) (Value, error) { return Value{Text: "v'\"$`\\\n"}, nil })
		plain := false
		for _, s := range txt.Segs {
			plain = plain || s.Repl != nil && s.Repl.From == nil && s.Repl.Place.Kind == PlacePlain
		}
		if err == nil && plain && !strings.Contains(string(out), `'v'\''"$`+"`\\\n'") {
			t.Errorf("%q rendered %q without the quoted word", src, out)
		}
	})
}
