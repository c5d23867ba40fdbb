package simulator

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// FieldError is a problem with one field of a scenario file, with the line it is on.
type FieldError struct {
	File string
	// Line is 0 when the problem is with the file as a whole.
	Line int
	// Path names the field, as in workloads[3].duration; empty for the whole file.
	Path    string
	Message string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}

// ErrorList is every problem found in a scenario file, in file order.
type ErrorList []*FieldError

// maxReported bounds the problems an ErrorList prints: past it, the rest are counted.
const maxReported = 20

func (l ErrorList) Error() string {
	lines := make([]string, 0, min(len(l), maxReported)+1)
	for i, e := range l {
		if i == maxReported {
			lines = append(lines, fmt.Sprintf("... and %d more", len(l)-maxReported))
			break
		}
		lines = append(lines, e.Error())
	}
	return strings.Join(lines, "\n")
}

// scalarDecoder is implemented by field types read from one YAML scalar (durations, quantities).
type scalarDecoder interface {
	decodeScalar(value string) error
}

// nodeDecoder is implemented by field types with a YAML shape of their own (a scalar or a mapping).
type nodeDecoder interface {
	decodeNode(d *decoder, n *yaml.Node, path string)
}

// decoder reads a YAML node tree into the scenario types strictly: unknown and duplicate fields,
// wrong kinds and bad scalars are errors naming the line and the field. It remembers the line of
// every field it decoded, so that later checks can name lines too.
//
// The YAML libraries' strict modes do not give these messages: go.yaml.in/yaml/v3 with
// KnownFields reports a duplicate key alone, and an unknown field by its Go type without the
// field's path; sigs.k8s.io/yaml converts to JSON first, which loses the lines.
type decoder struct {
	file  string
	lines map[string]int
	errs  ErrorList
	// origins are the scenario entries read from manifests.
	origins []origin
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, lines: map[string]int{}}
}

// errorf records a problem at path, on the line of path or of its closest decoded parent.
func (d *decoder) errorf(path, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{File: d.file, Line: d.lineOf(path), Path: path, Message: fmt.Sprintf(format, args...)})
}

// errorAt records a problem at path on the line of node n.
func (d *decoder) errorAt(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{File: d.file, Line: n.Line, Path: path, Message: fmt.Sprintf(format, args...)})
}

// lineOf returns the line of path, or of its closest parent that has one.
func (d *decoder) lineOf(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := d.lines[p]; ok {
			return l
		}
	}
	return 0
}

// parentPath strips the last element of a path: a.b[2].c -> a.b[2] -> a.b -> a.
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndex(p, "["); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndex(p, "."); i >= 0 {
		return p[:i]
	}
	return ""
}

func child(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func key(path, k string) string { return fmt.Sprintf("%s[%s]", path, k) }

// yamlSyntaxError turns the parser's "yaml: line 3: ..." into file:3: ...
func yamlSyntaxError(file string, err error) *FieldError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ": "); ok {
			if line, convErr := strconv.Atoi(num); convErr == nil {
				return &FieldError{File: file, Line: line, Message: "invalid YAML: " + tail}
			}
		}
	}
	return &FieldError{File: file, Message: "invalid YAML: " + msg}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	default:
		return "something else"
	}
}

var (
	scalarDecoderType = reflect.TypeFor[scalarDecoder]()
	nodeDecoderType   = reflect.TypeFor[nodeDecoder]()
)

// decode reads n into v, recording the line of path.
func (d *decoder) decode(n *yaml.Node, path string, v reflect.Value) {
	n = resolve(n)
	if path != "" {
		if _, seen := d.lines[path]; !seen {
			d.lines[path] = n.Line
		}
	}
	if v.Kind() == reflect.Pointer {
		if isNull(n) {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, path, v.Elem())
		return
	}
	if v.CanAddr() {
		if nd, ok := v.Addr().Interface().(nodeDecoder); ok && v.Addr().Type().Implements(nodeDecoderType) {
			nd.decodeNode(d, n, path)
			return
		}
		if sd, ok := v.Addr().Interface().(scalarDecoder); ok && v.Addr().Type().Implements(scalarDecoderType) {
			if n.Kind != yaml.ScalarNode || isNull(n) {
				d.errorAt(n, path, "must be a single value, not %s", kindName(n))
				return
			}
			if err := sd.decodeScalar(n.Value); err != nil {
				d.errorAt(n, path, "%v", err)
			}
			return
		}
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, path, v)
	case reflect.Map:
		d.decodeMap(n, path, v)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorAt(n, path, "must be a list, not %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, index(path, i), s.Index(i))
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || isNull(n) {
			d.errorAt(n, path, "must be a string, not %s", kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || err != nil {
			d.errorAt(n, path, "must be true or false, not %s", kindName(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(n.Value, 10, v.Type().Bits())
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || err != nil {
			d.errorAt(n, path, "must be a whole number of %d bits, not %s", v.Type().Bits(), kindName(n))
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(n.Value, 64)
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || err != nil {
			d.errorAt(n, path, "must be a number, not %s", kindName(n))
			return
		}
		v.SetFloat(f)
	default:
		d.errorAt(n, path, "cannot be read (internal error: unsupported field type %s)", v.Type())
	}
}

// pairs returns the key/value pairs of a mapping, with YAML merge keys (<<) expanded; own keys
// come after merged ones, so they win.
func (d *decoder) pairs(n *yaml.Node, path string) [][2]*yaml.Node {
	var out [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.ShortTag() != "!!merge" {
			continue
		}
		val = resolve(val)
		sources := []*yaml.Node{val}
		if val.Kind == yaml.SequenceNode {
			sources = val.Content
		}
		for _, src := range sources {
			src = resolve(src)
			if src.Kind != yaml.MappingNode {
				d.errorAt(k, path, "a merge key (<<) must refer to a mapping")
				continue
			}
			out = append(out, d.pairs(src, path)...)
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].ShortTag() != "!!merge" {
			out = append(out, [2]*yaml.Node{n.Content[i], n.Content[i+1]})
		}
	}
	return out
}

type fieldInfo struct {
	name  string
	index int
}

func structFields(t reflect.Type) map[string]fieldInfo {
	out := map[string]fieldInfo{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = fieldInfo{name: name, index: i}
	}
	return out
}

func (d *decoder) decodeStruct(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.errorAt(n, path, "must be a mapping of fields, not %s", kindName(n))
		return
	}
	fields := structFields(v.Type())
	seen := map[string]int{}
	merged := len(n.Content) > 0 && d.hasMerge(n)
	for _, kv := range d.pairs(n, path) {
		k, val := kv[0], kv[1]
		if k.Kind != yaml.ScalarNode {
			d.errorAt(k, path, "field names must be plain words")
			continue
		}
		p := child(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			d.errorAt(k, p, "unknown field; %s", knownFields(fields))
			continue
		}
		if line, dup := seen[k.Value]; dup && !merged {
			d.errorAt(k, p, "set twice (first on line %d)", line)
			continue
		}
		seen[k.Value] = k.Line
		d.lines[p] = k.Line
		fv := v.Field(f.index)
		fv.Set(reflect.Zero(fv.Type()))
		d.decode(val, p, fv)
	}
}

func (d *decoder) hasMerge(n *yaml.Node) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].ShortTag() == "!!merge" {
			return true
		}
	}
	return false
}

func knownFields(fields map[string]fieldInfo) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	return "known fields: " + strings.Join(names, ", ")
}

func (d *decoder) decodeMap(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.errorAt(n, path, "must be a mapping, not %s", kindName(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.errorAt(n, path, "cannot be read (internal error: map key type %s)", v.Type().Key())
		return
	}
	m := reflect.MakeMap(v.Type())
	seen := map[string]int{}
	merged := d.hasMerge(n)
	for _, kv := range d.pairs(n, path) {
		k, val := kv[0], kv[1]
		if k.Kind != yaml.ScalarNode || isNull(k) || k.Value == "" {
			d.errorAt(k, path, "keys must be non-empty strings")
			continue
		}
		p := key(path, k.Value)
		if line, dup := seen[k.Value]; dup && !merged {
			d.errorAt(k, p, "set twice (first on line %d)", line)
			continue
		}
		seen[k.Value] = k.Line
		d.lines[p] = k.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, p, elem)
		m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
	}
	v.Set(m)
}
