package cluster

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DecodeSection decodes a service's section of the config file (Stager, Watcher) into v,
// a pointer to the service's config struct, as strictly as the file's own fields: a key
// that names no field is an error naming the file, line and key, not silence. An empty
// section leaves v as it is.
func (c Config) DecodeSection(name string, node yaml.Node, v any) error {
	if node.IsZero() {
		return nil
	}
	file := c.Path
	if file == "" {
		file = "config"
	}
	var errs []error
	unknownKeys(&node, reflect.TypeOf(v), name, &errs)
	pos := positionsOf(&node, name)
	if len(errs) == 0 {
		if err := node.Decode(v); err != nil {
			errs = decodeErrors(file, err, pos)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return locate(file, errors.Join(errs...), pos)
}

var nodeType = reflect.TypeFor[yaml.Node]()

// unknownKeys walks node beside the Go type it decodes into and reports every mapping
// key that names no field (yaml.v3's KnownFields does this for a whole document only).
func unknownKeys(node *yaml.Node, t reflect.Type, path string, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if node.Kind == yaml.DocumentNode && len(node.Content) == 1 {
		node = node.Content[0]
	}
	if node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	if t == nodeType {
		return // kept raw: its owner decodes it
	}
	switch {
	case node.Kind == yaml.SequenceNode && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i, item := range node.Content {
			unknownKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case node.Kind != yaml.MappingNode:
	case t.Kind() == reflect.Map:
		for i := 0; i+1 < len(node.Content); i += 2 {
			unknownKeys(node.Content[i+1], t.Elem(), joinPath(path, node.Content[i].Value), errs)
		}
	case t.Kind() == reflect.Struct:
		fields := yamlFields(t)
		for i := 0; i+1 < len(node.Content); i += 2 {
			key := node.Content[i]
			ft, ok := fields[key.Value]
			if !ok {
				*errs = append(*errs, &fieldError{line: key.Line, path: joinPath(path, key.Value),
					msg: "unknown key (known: " + strings.Join(sortedKeys(fields), ", ") + ")"})
				continue
			}
			unknownKeys(node.Content[i+1], ft, joinPath(path, key.Value), errs)
		}
	}
}

// yamlFields maps the yaml names of t's fields (inline structs included) to their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys(m map[string]reflect.Type) []string { return slices.Sorted(maps.Keys(m)) }
