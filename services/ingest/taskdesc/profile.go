package taskdesc

import (
	"regexp"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/tree"
)

// ExtensionProfile is gridwire's documented extension of the v3 description: the GPE OS
// profile parts a job may ask for, which v3 itself has no words for. Its value is an
// object:
//
//	"x-gpe": {"application": "povray", "application_version": "3.7",
//	          "variation": "debug", "fields": {"QUALITY": "high"}}
//
// application (and application_version) name a profile Application the job runs under
// (placement considers only clusters whose profile has it), variation one invocation
// variation of its template, fields values for the templates' settable fields (through
// their tags and limits). The "x-" prefix keeps it apart from any future v3 attribute.
const ExtensionProfile = "x-gpe"

// fieldName is what a profile replacement name may be (services/incarnator/profile).
var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_:.-]{0,127}$`)

func (d *decoder) profileExtension(v *tree.Node, job *events.Job) {
	if !d.want(v, tree.Object, ExtensionProfile) {
		return
	}
	var app events.Application
	var appNode *tree.Node
	for _, f := range v.Fields {
		field := ExtensionProfile + "." + keyName(f.Key)
		switch f.Key {
		case "application":
			app.Name, _ = d.nonEmpty(f.Value, field)
			appNode = f.Value
		case "application_version":
			app.Version, _ = d.nonEmpty(f.Value, field)
		case "variation":
			app.Variation, _ = d.nonEmpty(f.Value, field)
		case "fields":
			job.Fields = d.profileFields(f.Value, field)
		default:
			d.list.Add(f.Line, f.Col, field, "unknown field (application, application_version, variation, fields)")
		}
	}
	switch {
	case app.Name != "":
		job.Application = &app
	case appNode == nil && (app.Version != "" || app.Variation != ""):
		d.list.Add(v.Line, v.Col, ExtensionProfile, "application_version and variation need an application")
	}
}

func (d *decoder) profileFields(v *tree.Node, field string) map[string]string {
	if !d.want(v, tree.Object, field) {
		return nil
	}
	out := make(map[string]string, len(v.Fields))
	for _, f := range v.Fields {
		ff := field + "." + keyName(f.Key)
		if !fieldName.MatchString(f.Key) {
			d.list.Add(f.Line, f.Col, ff, "is not a profile field name (a letter or '_', then letters, digits, '_', ':', '.', '-')")
			continue
		}
		if s, ok := d.str(f.Value, ff); ok {
			out[f.Key] = s
		}
	}
	return out
}
