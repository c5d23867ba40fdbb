package simulator

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuewebhooks "sigs.k8s.io/kueue/pkg/webhooks"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

// FieldError is a problem with one field of a scenario file, with the line it is on.
type FieldError struct {
	File string
	// Line is 0 when the problem is with the file as a whole.
	Line int
	// Path names the field, as in workloads[3].duration or ClusterQueue gpu: spec.cohortName;
	// empty for the whole file.
	Path    string
	Message string
}

func (e *FieldError) Error() string {
	s := e.File
	if e.Line > 0 {
		s += fmt.Sprintf(":%d", e.Line)
	}
	if e.Path != "" {
		s += ": " + e.Path
	}
	return s + ": " + e.Message
}

// ErrorList is every problem found in a scenario file, in file order.
type ErrorList []*FieldError

// maxReported bounds the problems an ErrorList prints: past it, the rest are counted.
const maxReported = 20

func (l ErrorList) Error() string {
	var lines []string
	for _, e := range l[:min(len(l), maxReported)] {
		lines = append(lines, e.Error())
	}
	if len(l) > maxReported {
		lines = append(lines, fmt.Sprintf("... and %d more", len(l)-maxReported))
	}
	return strings.Join(lines, "\n")
}

// parser reads a scenario file. lines has the line of every field of the scenario's own
// document, by path; objects has the manifest node of every object, by kind and name.
type parser struct {
	s       *Scenario
	file    string
	lines   map[string]int
	objects map[string]*yaml.Node
	errs    ErrorList
}

func (p *parser) errorAt(line int, path, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{File: p.file, Line: line, Path: path, Message: fmt.Sprintf(format, args...)})
}

// errorf records a problem at a path of the scenario's document, on its line or its closest
// parent's.
func (p *parser) errorf(path, format string, args ...any) {
	line := 0
	for at := path; at != "" && line == 0; at = parentPath(at) {
		line = p.lines[at]
	}
	p.errorAt(line, path, format, args...)
}

// objectError records a problem at an API field path of an object read from a manifest.
func (p *parser) objectError(kind, name, field, format string, args ...any) {
	n := p.objects[kind+" "+name]
	line := 0
	if n != nil {
		line = lineIn(n, field)
	}
	p.errorAt(line, strings.TrimSuffix(kind+" "+name+": "+field, ": "), format, args...)
}

// parentPath strips the last element of a path: a.b[2].c -> a.b[2] -> a.b -> a.
func parentPath(p string) string {
	if i := strings.LastIndex(p, "["); strings.HasSuffix(p, "]") && i >= 0 {
		return p[:i]
	}
	return p[:max(strings.LastIndex(p, "."), 0)]
}

func child(path, name string) string { return strings.TrimPrefix(path+"."+name, ".") }

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func key(path, k string) string { return fmt.Sprintf("%s[%s]", path, k) }

// yamlSyntaxError turns the parser's "yaml: line 3: ..." into file:3: ...
func yamlSyntaxError(file string, err error) *FieldError {
	msg, line := strings.TrimPrefix(err.Error(), "yaml: "), 0
	if _, scanErr := fmt.Sscanf(msg, "line %d: ", &line); scanErr == nil {
		_, msg, _ = strings.Cut(msg, ": ")
	}
	return &FieldError{File: file, Line: line, Message: "invalid YAML: " + msg}
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch resolve(n).Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if isNull(n) {
		return "null"
	}
	return fmt.Sprintf("%q", n.Value)
}

// manifest is a Kueue (or Kubernetes) object written in a scenario file as it would be applied.
type manifest struct {
	node *yaml.Node
	obj  *unstructured.Unstructured
}

// read splits a scenario file into its own document (at most one), decoded into s strictly, and
// the manifests in the others (one object per document, or a List).
func (p *parser) read(data []byte, s *Scenario) (manifests []manifest) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var body *yaml.Node
	seenAny := false
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if !errors.Is(err, io.EOF) {
				p.errs = append(p.errs, yamlSyntaxError(p.file, err))
			}
			break
		}
		root := &doc
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		if isNull(root) || root.Kind == yaml.DocumentNode {
			continue
		}
		seenAny = true
		if root.Kind == yaml.MappingNode && (mappingValue(root, "apiVersion") != nil || mappingValue(root, "kind") != nil) {
			for _, n := range p.listItems(root) {
				manifests = p.addNode(manifests, n)
			}
			continue
		}
		if body != nil {
			p.errorAt(root.Line, "", "a scenario has one document of its own fields (without apiVersion and kind); found a second one")
			return nil
		}
		body = root
	}
	if !seenAny && len(p.errs) == 0 {
		p.errorAt(0, "", "the file is empty")
	}
	if body == nil || len(p.errs) > 0 {
		return manifests
	}
	p.decode(body, "", reflect.ValueOf(s).Elem())
	return manifests
}

// removedSections held the short form of Kueue's objects, which scenarios no longer use.
var removedSections = []string{"flavors", "cohorts", "clusterQueues", "localQueues", "priorityClasses"}

// decode sets v from n strictly, as yaml.v3 would set it, one field at a time: each problem is
// recorded at its path and line, and so is the line of every field (p.lines). A type with its own
// UnmarshalYAML reads its node itself; an ErrorList it returns is placed under path.
func (p *parser) decode(n *yaml.Node, path string, v reflect.Value) {
	n = resolve(n)
	if u, ok := v.Addr().Interface().(yaml.Unmarshaler); ok && !isNull(n) {
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			p.note(child(path, n.Content[i].Value), n.Content[i].Line)
		}
		var list ErrorList
		if err := u.UnmarshalYAML(n); errors.As(err, &list) {
			for _, e := range list {
				p.errorAt(e.Line, child(path, e.Path), "%s", e.Message)
			}
		} else if err != nil {
			p.errorAt(n.Line, path, "%v", err)
		}
		return
	}
	if isNull(n) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		p.decode(n, path, v.Elem())
	case reflect.Struct, reflect.Map:
		if n.Kind != yaml.MappingNode {
			p.errorAt(n.Line, path, "must be %s, not %s", typeWord(v.Type().String()), kindName(n))
			return
		}
		if v.Kind() == reflect.Map {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, item := n.Content[i], n.Content[i+1]
			sub, elem := key(path, k.Value), reflect.Value{}
			if v.Kind() == reflect.Map {
				elem = reflect.New(v.Type().Elem()).Elem()
			} else {
				sub, elem = child(path, k.Value), fieldNamed(v, k.Value)
			}
			if line, twice := p.lines[sub]; twice {
				p.errorAt(k.Line, sub, "set twice (first on line %d)", line)
				continue
			}
			p.note(sub, k.Line)
			if !elem.IsValid() {
				msg := "unknown field"
				if path == "" && slices.Contains(removedSections, k.Value) {
					msg = "the short form of Kueue's objects is no longer read; write them as manifests (see docs/simulator.md; kubectl timeshare what-if --save-scenario writes them)"
				}
				p.errorAt(k.Line, sub, "%s", msg)
				continue
			}
			p.decode(item, sub, elem)
			if v.Kind() == reflect.Map {
				v.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			p.errorAt(n.Line, path, "must be a list, not %s", kindName(n))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content)))
		for i, item := range n.Content {
			p.note(index(path, i), item.Line)
			p.decode(item, index(path, i), v.Index(i))
		}
	default:
		if err := n.Decode(v.Addr().Interface()); err != nil {
			p.errorAt(n.Line, path, "must be %s, not %s", typeWord(v.Type().String()), kindName(n))
		}
	}
}

// note records the line of the field at path, the first time it is seen.
func (p *parser) note(path string, line int) {
	if _, seen := p.lines[path]; !seen {
		p.lines[path] = line
	}
}

// fieldNamed is the field of struct v that YAML names name; invalid if none.
func fieldNamed(v reflect.Value, name string) reflect.Value {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag == name && f.IsExported() {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

// typeWord says what a Go type reads from YAML.
func typeWord(t string) string {
	switch {
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int"):
		return "a whole number"
	case t == "string":
		return "a string"
	}
	return "a mapping of fields"
}

// listItems returns the items of a List, or the node itself.
func (p *parser) listItems(n *yaml.Node) []*yaml.Node {
	if kind := mappingValue(n, "kind"); kind == nil || kind.Value != "List" {
		return []*yaml.Node{n}
	}
	items := mappingValue(n, "items")
	if items == nil || items.Kind != yaml.SequenceNode {
		p.errorAt(n.Line, "items", "a List needs a list of items")
		return nil
	}
	return items.Content
}

// mappingKey is the index of key's node in mapping n; -1 if n has no such key.
func mappingKey(n *yaml.Node, key string) int {
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return i
		}
	}
	return -1
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	n = resolve(n)
	if i := mappingKey(n, key); i >= 0 {
		return resolve(n.Content[i+1])
	}
	return nil
}

// addNode reads a manifest's node as an object.
func (p *parser) addNode(manifests []manifest, n *yaml.Node) []manifest {
	var raw map[string]any
	err := n.Decode(&raw)
	var data []byte
	if err == nil {
		// Through JSON, so that numbers and nested maps have the types the API machinery uses.
		data, err = json.Marshal(raw)
	}
	u := &unstructured.Unstructured{}
	if err == nil {
		err = u.UnmarshalJSON(data)
	}
	if err != nil {
		p.errorAt(n.Line, "", "invalid manifest: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return manifests
	}
	return append(manifests, manifest{node: n, obj: u})
}

var pathElem = regexp.MustCompile(`([^.\[\]]+)|\[([^\]]+)\]`)

// lineIn is the line of an API field path (spec.resourceGroups[0].flavors[1]) in a manifest: of
// the field itself, or of the closest parent written in the file.
func lineIn(n *yaml.Node, path string) int {
	line := n.Line
	for _, m := range pathElem.FindAllStringSubmatch(path, -1) {
		switch n = resolve(n); n.Kind {
		case yaml.MappingNode:
			i := mappingKey(n, m[1]+m[2])
			if i < 0 {
				return line
			}
			line, n = n.Content[i].Line, n.Content[i+1]
		case yaml.SequenceNode:
			i, err := strconv.Atoi(m[2])
			if err != nil || i >= len(n.Content) {
				return line
			}
			n = n.Content[i]
			line = n.Line
		default:
			return line
		}
	}
	return line
}

var quotedField = regexp.MustCompile(`"([^"]+)"`)

// addManifests checks each manifest as the API server and the manager's webhooks would, and adds
// it to the scenario's objects. Problems name the object, the field and its line.
func (p *parser) addManifests(s *Scenario, manifests []manifest) {
	for _, m := range manifests {
		u := m.obj
		kind, name := u.GetKind(), u.GetName()
		if name != "" && p.objects[kind+" "+name] == nil {
			p.objects[kind+" "+name] = m.node
		}
		fail := func(field, format string, args ...any) {
			p.errorAt(lineIn(m.node, field), strings.TrimSuffix(kind+" "+name+": "+field, ": "), format, args...)
		}
		gv := u.GroupVersionKind().GroupVersion()
		if gv != kueue.SchemeGroupVersion && (gv.Group != schedulingv1.GroupName || kind != "PriorityClass") {
			fail("apiVersion", "%s %s is not something a scenario holds; use ResourceFlavor, Cohort, ClusterQueue, LocalQueue or WorkloadPriorityClass of %s, or a scheduling.k8s.io/v1 PriorityClass",
				u.GetAPIVersion(), kind, kueue.SchemeGroupVersion)
			continue
		}
		typed, problems, known := DecodeManifest(u)
		if !known {
			fail("kind", "%s is not something a scenario holds; use ResourceFlavor, Cohort, ClusterQueue, LocalQueue or WorkloadPriorityClass", kind)
			continue
		}
		if name == "" {
			fail("metadata.name", "required")
			continue
		}
		if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
			fail("metadata.name", "%q is not a valid name: %s", name, strings.Join(problems, "; "))
			continue
		}
		for _, pr := range problems {
			fail(pr.Field, "%s", pr.Message)
		}
		if len(problems) > 0 {
			continue
		}
		refused := func(errs field.ErrorList) bool {
			for _, e := range errs {
				fail(e.Field, "%s", e.ErrorBody())
			}
			return len(errs) > 0
		}
		switch obj := typed.(type) {
		case *kueue.ResourceFlavor:
			if obj.Spec.TopologyName != nil {
				fail("spec.topologyName", "topology-aware scheduling is not simulated")
				continue
			}
			if !refused(kueuewebhooks.ValidateResourceFlavor(obj)) {
				s.Flavors = append(s.Flavors, obj)
			}
		case *kueue.ClusterQueue:
			if refused(clusterQueueProblems(u, obj)) || p.enums(u, fail) {
				continue
			}
			if notes := Unsimulated(u); len(notes) > 0 {
				for _, n := range notes {
					f, problem, _ := strings.Cut(n, " ")
					fail(f, "%s; leave it out of a scenario", strings.TrimPrefix(problem, "is "))
				}
				continue
			}
			s.ClusterQueues = append(s.ClusterQueues, u)
		case *kueue.Cohort:
			if !refused(cohortProblems(u, obj)) {
				s.Cohorts = append(s.Cohorts, u)
			}
		case *kueue.LocalQueue:
			s.LocalQueues = append(s.LocalQueues, obj)
		case *kueue.WorkloadPriorityClass:
			if _, errs := annotations.ParseToleration(obj.Annotations, obj.Value); !refused(errs) {
				s.WorkloadPriorityClasses = append(s.WorkloadPriorityClasses, obj)
			}
		case *schedulingv1.PriorityClass:
			if _, errs := annotations.ParseToleration(obj.Annotations, obj.Value); !refused(errs) {
				s.PriorityClasses = append(s.PriorityClasses, obj)
			}
		}
	}
}

// enums checks the ClusterQueue fields whose values Kueue's schema lists, as the API server does.
func (p *parser) enums(u *unstructured.Unstructured, fail func(field, format string, args ...any)) bool {
	policies := []string{string(kueue.PreemptionPolicyNever), string(kueue.PreemptionPolicyLowerPriority), string(kueue.PreemptionPolicyLowerOrNewerEqualPriority)}
	bad := false
	for field, allowed := range map[string][]string{
		"spec.queueingStrategy":                     {string(kueue.BestEffortFIFO), string(kueue.StrictFIFO)},
		"spec.preemption.withinClusterQueue":        policies,
		"spec.preemption.reclaimWithinCohort":       append(slices.Clone(policies), string(kueue.PreemptionPolicyAny)),
		"spec.preemption.borrowWithinCohort.policy": {string(kueue.BorrowWithinCohortPolicyNever), string(kueue.BorrowWithinCohortPolicyLowerPriority)},
	} {
		if v, found, _ := unstructured.NestedString(u.Object, strings.Split(field, ".")...); found && !slices.Contains(allowed, v) {
			fail(field, "%q is not supported; use one of %s", v, strings.Join(allowed, ", "))
			bad = true
		}
	}
	return bad
}

// ManifestProblem is a problem with one field of a manifest; Field is empty for the whole object.
type ManifestProblem struct {
	Field   string
	Message string
}

// DecodeManifest reads a manifest into Kueue's (or Kubernetes') type for its kind as a strict
// apply would: unknown fields are problems naming the field. kueue-timeshare's fields are allowed
// where the manager's webhooks read them. known is false for a kind a scenario does not hold.
func DecodeManifest(u *unstructured.Unstructured) (typed any, problems []ManifestProblem, known bool) {
	// Kueue's types lack our fields: they are checked by our webhooks, not here.
	stripped := u.DeepCopy()
	switch u.GetKind() {
	case "ResourceFlavor":
		typed = &kueue.ResourceFlavor{}
	case "ClusterQueue":
		typed = &kueue.ClusterQueue{}
		for _, f := range tsapi.Fields()["ClusterQueue"] {
			unstructured.RemoveNestedField(stripped.Object, f.Path()...)
		}
	case "Cohort":
		typed = &kueue.Cohort{}
		if pr, ok, _ := unstructured.NestedMap(u.Object, "spec", "preemption"); ok {
			known := tsapi.CohortPreemptionSchema().Properties
			for _, k := range slices.Sorted(maps.Keys(pr)) {
				if _, ok := known[k]; !ok {
					problems = append(problems, ManifestProblem{Field: "spec.preemption." + k,
						Message: "unknown field; a Cohort's spec.preemption has " + strings.Join(slices.Sorted(maps.Keys(known)), ", ")})
				}
			}
		}
		unstructured.RemoveNestedField(stripped.Object, "spec", "preemption")
	case "LocalQueue":
		typed = &kueue.LocalQueue{}
	case "WorkloadPriorityClass":
		typed = &kueue.WorkloadPriorityClass{}
	case "PriorityClass":
		typed = &schedulingv1.PriorityClass{}
	default:
		return nil, nil, false
	}
	data, err := json.Marshal(stripped.Object)
	if err != nil {
		return nil, append(problems, ManifestProblem{Message: err.Error()}), true
	}
	strict, err := kjson.UnmarshalStrict(data, typed)
	if err != nil {
		return nil, append(problems, ManifestProblem{Message: fmt.Sprintf("invalid %s: %v", u.GetKind(), err)}), true
	}
	for _, e := range strict {
		field := ""
		if q := quotedField.FindStringSubmatch(e.Error()); q != nil {
			field = q[1]
		}
		problems = append(problems, ManifestProblem{Field: field, Message: e.Error()})
	}
	return typed, problems, true
}

// ValidateClusterQueueObject runs the checks the manager's webhooks run on a ClusterQueue
// (upstream's ClusterQueue validation and ours for kueue-timeshare's fields) and returns the
// error the API server would give, or nil.
func ValidateClusterQueueObject(u *unstructured.Unstructured) error {
	return invalid(u, clusterQueueProblems)
}

// ValidateCohortObject is ValidateClusterQueueObject for a Cohort (upstream's Cohort webhook).
func ValidateCohortObject(u *unstructured.Unstructured) error { return invalid(u, cohortProblems) }

// invalid is the API server's error for what problems finds in u, nil when it finds nothing.
func invalid[T any](u *unstructured.Unstructured, problems func(*unstructured.Unstructured, *T) field.ErrorList) error {
	typed, err := typedObject[T](u)
	if err != nil {
		return err
	}
	if errs := problems(u, typed); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: kueue.SchemeGroupVersion.Group, Kind: u.GetKind()}, u.GetName(), errs)
	}
	return nil
}

// clusterQueueProblems are what upstream's ClusterQueue validation and ours of kueue-timeshare's
// fields refuse in u, read by Kueue as cq.
func clusterQueueProblems(u *unstructured.Unstructured, cq *kueue.ClusterQueue) field.ErrorList {
	errs := kueuewebhooks.ValidateClusterQueue(cq)
	spec, _ := json.Marshal(u.Object["spec"])
	ext, err := tsapi.ParseClusterQueueExtension(spec)
	if err != nil {
		return append(errs, field.Invalid(field.NewPath("spec"), nil, err.Error()))
	}
	return append(errs, tsapi.ValidateClusterQueueExtension(ext, cq.Spec.Preemption)...)
}

// cohortProblems are what upstream's Cohort webhook and ours of kueue-timeshare's fields refuse
// in u, read by Kueue as c.
func cohortProblems(u *unstructured.Unstructured, c *kueue.Cohort) field.ErrorList {
	// Upstream's validation is unexported; its webhook gives its field errors aggregated.
	_, err := (&kueuewebhooks.CohortWebhook{}).ValidateCreate(context.Background(), c)
	var errs field.ErrorList
	if agg, ok := err.(utilerrors.Aggregate); ok {
		for _, e := range agg.Errors() {
			fe, _ := e.(*field.Error)
			errs = append(errs, cmp.Or(fe, field.InternalError(nil, e)))
		}
	}
	spec, _ := json.Marshal(u.Object["spec"])
	ext, err := tsapi.ParseCohortExtension(spec)
	if err != nil {
		return append(errs, field.Invalid(field.NewPath("spec"), nil, err.Error()))
	}
	return append(errs, tsapi.ValidateCohortExtension(ext)...)
}

// Unsimulated names the fields set on a ClusterQueue that the simulator does not model, each as
// "<field> is not simulated ...".
func Unsimulated(u *unstructured.Unstructured) []string {
	var notes []string
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	for _, f := range []string{"admissionChecks", "admissionChecksStrategy", "admissionScope"} {
		if _, ok := spec[f]; ok {
			notes = append(notes, fmt.Sprintf("spec.%s is not simulated", f))
		}
	}
	if sp, _, _ := unstructured.NestedString(spec, "stopPolicy"); sp != "" && sp != string(kueue.None) {
		notes = append(notes, fmt.Sprintf("spec.stopPolicy %s is not simulated (the ClusterQueue admits as if it were None)", sp))
	}
	if sel, _, _ := unstructured.NestedMap(spec, "namespaceSelector"); len(sel) > 0 {
		notes = append(notes, "spec.namespaceSelector is not simulated (every namespace is admitted)")
	}
	for f, def := range map[string]string{"whenCanBorrow": string(kueue.MayStopSearch), "whenCanPreempt": string(kueue.TryNextFlavor)} {
		if v, _, _ := unstructured.NestedString(spec, "flavorFungibility", f); v != "" && v != def {
			notes = append(notes, fmt.Sprintf("spec.flavorFungibility.%s %s is not simulated", f, v))
		}
	}
	slices.Sort(notes)
	return notes
}
