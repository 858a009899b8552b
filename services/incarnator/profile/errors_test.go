package profile

import (
	"errors"
	"strings"
	"testing"
)

func TestParseErrorsNameFileLineAndField(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"root", `<Prof name="x"/>`, "test.xml:1:1: Prof: root element must be Profile"},
		{"no name", "<Profile>\n</Profile>", "test.xml:1:1: Profile@name: required attribute is missing"},
		{"unknown element", "<Profile name=\"x\">\n  <Templat name=\"a\"/>\n</Profile>", "test.xml:2:3: Templat: unknown element in Profile"},
		{"two bodies", "<Profile name=\"x\"><Template name=\"T\">\n<Invocation><Body>a</Body><Body>b</Body></Invocation></Template></Profile>",
			`test.xml:2:1: Invocation: needs exactly one Body or StaticScript, has 2`},
		{"no body", "<Profile name=\"x\"><Template name=\"T\">\n<Invocation/></Template></Profile>",
			`test.xml:2:1: Invocation: needs exactly one Body or StaticScript, has 0`},
		{"bad min", "<Profile name=\"x\"><Template name=\"T\"><Field name=\"F\">\n <Min>ten</Min></Field></Template></Profile>",
			`test.xml:2:2: Min: "ten" is not a plain decimal number`},
		{"min above max", "<Profile name=\"x\"><Template name=\"T\">\n<Field name=\"F\"><Min>3</Min><Max>2</Max></Field></Template></Profile>",
			`test.xml:2:1: Field: Min 3 is greater than Max 2`},
		{"bad settable", "<Profile name=\"x\"><Template name=\"T\">\n<Field name=\"F\" isSettable=\"perhaps\"/></Template></Profile>",
			`test.xml:2:1: Field@isSettable: "perhaps" is not a boolean`},
		{"duplicate template", "<Profile name=\"x\"><Template name=\"T\"/>\n<Template name=\"T\"/></Profile>",
			`test.xml:2:1: Template@name: template "T" is defined twice in this profile (first at line 1)`},
		{"duplicate field", "<Profile name=\"x\"><Template name=\"T\"><Field name=\"F\"/>\n<Field name=\"F\"/></Template></Profile>",
			`test.xml:2:1: Field@name: field "F" is defined twice in template "T" (first at line 1)`},
		{"static without arguments", "<Profile name=\"x\"><Template name=\"T\"><Invocation>\n<StaticScript fileName=\"a\">x</StaticScript></Invocation></Template></Profile>",
			`test.xml:2:1: StaticScript@arguments: required attribute is missing`},
		{"static file name with slash", "<Profile name=\"x\"><Template name=\"T\"><Invocation>\n<StaticScript fileName=\"../a\" arguments=\"\">x</StaticScript></Invocation></Template></Profile>",
			`test.xml:2:1: StaticScript@fileName: "../a" must be a plain file name`},
		{"application without version", "<Profile name=\"x\">\n<Application name=\"a\" template=\"T\"><ApplicationName>A</ApplicationName></Application></Profile>",
			`test.xml:2:1: ApplicationVersion: required element is missing`},
		{"bad regexp", "<Profile name=\"x\"><Template name=\"T\"><Invocation>\n<Body>&lt;A/(?=x)/y&gt;</Body></Invocation></Template></Profile>",
			`test.xml:2:1: Body: replacement <A/(?=x)/y>: profile: regular expression not expressible in RE2: "(?=x)": lookahead (?=...) / (?!...) is not supported by RE2`},
		{"open quote", "<Profile name=\"x\"><Template name=\"T\"><Invocation>\n<Body>echo 'abc</Body></Invocation></Template></Profile>",
			`test.xml:2:1: Body: the text ends inside single quotes; it would swallow the script text after it`},
		{"xml syntax", "<Profile name=\"x\">\n<Template>\n</Profile>", "test.xml:3:1: XML: element <Template> closed by </Profile>"},
		{"text in container", "<Profile name=\"x\">\nstray</Profile>", `test.xml:1:1: Profile: unexpected text "stray"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("test.xml", []byte(c.src))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v is not ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("got  %s\nwant %s", err, c.want)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse("test.xml", []byte("<Profile name=\"x\">\n<Bad/>\n<Worse/>\n</Profile>"))
	if err == nil || !strings.Contains(err.Error(), "test.xml:2:1") || !strings.Contains(err.Error(), "test.xml:3:1") {
		t.Errorf("want both problems, got %v", err)
	}
}

func TestSetErrors(t *testing.T) {
	req := requiredTemplates()
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"cycle", map[string]string{
			"a.xml": profileXML("a", "b", req), "b.xml": profileXML("b", "c", ""), "c.xml": profileXML("c", "a", "")},
			[]string{"profiles/a.xml:2:1: Profile@extends: inheritance cycle: a (profiles/a.xml:2:1) extends b (profiles/b.xml:2:1) extends c (profiles/c.xml:2:1) extends a"}},
		{"self", map[string]string{"a.xml": profileXML("a", "a", req)},
			[]string{"inheritance cycle: a (profiles/a.xml:2:1) extends a"}},
		{"missing parent", map[string]string{"a.xml": profileXML("a", "nowhere", req)},
			[]string{`profiles/a.xml:2:1: Profile@extends: profile "a" extends "nowhere", which no file in the set defines (a profile directory is the whole set: the shipped profiles, deploy/profiles, are in it only if copied there)`}},
		{"missing required", map[string]string{"a.xml": profileXML("a", "", `<Template name="START"><Invocation><Body>x</Body></Invocation></Template>
<Template name="LIST"><Invocation name="FILE"><Body>x</Body></Invocation></Template>`)},
			[]string{`profiles/a.xml:2:1: Template: profile "a" has no template JOB_PROLOGUE (required by the gateway (spec 2.5))`,
				`profiles/a.xml:3:1: Invocation: template LIST of profile "a" has no "DIR" variation`}},
		{"abstract base needs none", map[string]string{"a.xml": profileXML("a", "", ""), "b.xml": profileXML("b", "a", req)}, nil},
		{"duplicate name", map[string]string{"a.xml": profileXML("a", "", req), "b.xml": profileXML("a", "", req)},
			[]string{`profiles/b.xml:2:1: Profile@name: profile "a" is also defined at profiles/a.xml:2:1`}},
		{"storage template", map[string]string{"a.xml": profileXML("a", "", req+"\n<Storage name=\"S\" template=\"NONE\"/>")},
			[]string{`Storage@template: storage "S" of profile "a" names template "NONE", which the profile does not have`}},
		{"application template", map[string]string{"a.xml": profileXML("a", "", req+"\n<Application name=\"x\" template=\"NONE\"><ApplicationName>X</ApplicationName><ApplicationVersion>1</ApplicationVersion></Application>")},
			[]string{`Application@template: application "x" of profile "a" names template "NONE"`}},
		{"static needs BIN", map[string]string{"a.xml": profileXML("a", "", req+"\n<Template name=\"S\"><Invocation><StaticScript fileName=\"s\" arguments=\"\">x</StaticScript></Invocation></Template>")},
			[]string{`profile "a" has no template BIN (static scripts need it)`}},
		{"static script where none runs", map[string]string{"a.xml": profileXML("a", "", strings.Replace(req, `<Template name="JOB_PROLOGUE"><Invocation name=""><Body>job_prologue</Body></Invocation></Template>`,
			`<Template name="JOB_PROLOGUE"><Invocation><StaticScript fileName="p" arguments="">x</StaticScript></Invocation></Template>`, 1)+
			"\n<Template name=\"BIN\"><Invocation><Body>x</Body></Invocation><Invocation name=\"STATIC_SCRIPT\"><Body>x</Body></Invocation><Invocation name=\"RUN_STATIC_SCRIPT\"><Body>x</Body></Invocation></Template>"+
			"\n<Template name=\"APP\"><Invocation><StaticScript fileName=\"a\" arguments=\"\">x</StaticScript></Invocation></Template>")},
			[]string{`StaticScript: template JOB_PROLOGUE variation "" of profile "a" is a static script, which gridwire runs only as a control script`,
				`StaticScript: template APP variation "" of profile "a" is a static script`}},
		{"no files", map[string]string{"README": "not a profile"}, []string{"profiles: no *.xml profile files"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadMap(c.files)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got  %s\nwant %s", err, w)
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(profileXML("a", "b", requiredTemplates()))
	f.Add(profileXML("h", "", `<Template name="Hello"><Invocation name=""><Body><![CDATA[echo <TEXT>]]></Body></Invocation><Field name="TEXT" isSettable="false"><Min>1</Min><Tag name="x">y</Tag><Value>Hello</Value></Field></Template>`))
	f.Add(`<Profile name="x"><Template name="T"><Invocation><StaticScript fileName="s" arguments="&lt;A&gt;">#!/bin/sh</StaticScript></Invocation></Template></Profile>`)
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Parse("f.xml", []byte(src))
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		if p == nil {
			t.Fatal("no profile and no error")
		}
	})
}
