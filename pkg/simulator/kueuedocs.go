package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuewebhooks "sigs.k8s.io/kueue/pkg/webhooks"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

// manifest is a Kueue (or Kubernetes) object written in a scenario file as it would be applied.
type manifest struct {
	node *yaml.Node
	obj  *unstructured.Unstructured
}

// parseDocuments splits a scenario file into its own document (fields of Scenario; at most one)
// and the manifests in the others (one object per document, or a List).
func (d *decoder) parseDocuments(r io.Reader) (body *yaml.Node, manifests []manifest) {
	dec := yaml.NewDecoder(r)
	seenAny := false
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if !errors.Is(err, io.EOF) {
				d.errs = append(d.errs, yamlSyntaxError(d.file, err))
			}
			break
		}
		root := &doc
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		if isNull(root) {
			continue
		}
		seenAny = true
		if !isManifest(root) {
			if body != nil {
				d.errs = append(d.errs, &FieldError{File: d.file, Line: root.Line,
					Message: "a scenario has one document of its own fields (without apiVersion and kind); found a second one"})
				return nil, nil
			}
			body = root
			continue
		}
		for _, n := range d.listItems(root) {
			var raw map[string]any
			if err := n.Decode(&raw); err != nil {
				d.errs = append(d.errs, &FieldError{File: d.file, Line: n.Line, Message: "invalid manifest: " + strings.TrimPrefix(err.Error(), "yaml: ")})
				continue
			}
			// Through JSON, so that numbers and nested maps have the types the API machinery uses.
			data, err := json.Marshal(raw)
			if err != nil {
				d.errs = append(d.errs, &FieldError{File: d.file, Line: n.Line, Message: "invalid manifest: " + err.Error()})
				continue
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(data); err != nil {
				d.errs = append(d.errs, &FieldError{File: d.file, Line: n.Line, Message: "invalid manifest: " + err.Error()})
				continue
			}
			manifests = append(manifests, manifest{node: n, obj: u})
		}
	}
	if !seenAny && len(d.errs) == 0 {
		d.errs = append(d.errs, &FieldError{File: d.file, Message: "the file is empty"})
	}
	return body, manifests
}

func isManifest(n *yaml.Node) bool {
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k == "apiVersion" || k == "kind" {
			return true
		}
	}
	return false
}

// listItems returns the items of a List, or the node itself.
func (d *decoder) listItems(n *yaml.Node) []*yaml.Node {
	if kind := mappingValue(n, "kind"); kind == nil || kind.Value != "List" {
		return []*yaml.Node{n}
	}
	items := mappingValue(n, "items")
	if items == nil || items.Kind != yaml.SequenceNode {
		d.errs = append(d.errs, &FieldError{File: d.file, Line: n.Line, Path: "items", Message: "a List needs a list of items"})
		return nil
	}
	return items.Content
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return resolve(n.Content[i+1])
		}
	}
	return nil
}

var pathElem = regexp.MustCompile(`([^.\[\]]+)|\[(\d+)\]`)

// lineIn is the line of an API field path (spec.resourceGroups[0].flavors[1]) in a manifest: of
// the field itself, or of the closest parent written in the file.
func lineIn(n *yaml.Node, path string) int {
	line := n.Line
	for _, m := range pathElem.FindAllStringSubmatch(path, -1) {
		n = resolve(n)
		switch {
		case m[1] != "" && n.Kind == yaml.MappingNode:
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == m[1] {
					line, n, found = n.Content[i].Line, n.Content[i+1], true
					break
				}
			}
			if !found {
				return line
			}
		case m[2] != "" && n.Kind == yaml.SequenceNode:
			i, _ := strconv.Atoi(m[2])
			if i >= len(n.Content) {
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
// it to the scenario. Problems name the object, the field and its line.
func (d *decoder) addManifests(s *Scenario, manifests []manifest) {
	for _, m := range manifests {
		u := m.obj
		what := fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
		fail := func(field, format string, args ...any) {
			line := m.node.Line
			if field != "" {
				line = lineIn(m.node, field)
			}
			d.errs = append(d.errs, &FieldError{File: d.file, Line: line, Path: strings.TrimSuffix(what+": "+field, ": "), Message: fmt.Sprintf(format, args...)})
		}
		if u.GetName() == "" {
			fail("metadata.name", "required")
			continue
		}
		gv := u.GroupVersionKind().GroupVersion()
		switch {
		case gv == kueue.SchemeGroupVersion:
		case gv.Group == schedulingv1.GroupName && u.GetKind() == "PriorityClass":
		default:
			fail("apiVersion", "%s %s is not something a scenario holds; use ResourceFlavor, Cohort, ClusterQueue, LocalQueue or WorkloadPriorityClass of %s, or a scheduling.k8s.io/v1 PriorityClass",
				u.GetAPIVersion(), u.GetKind(), kueue.SchemeGroupVersion)
			continue
		}
		typed, problems, known := DecodeManifest(u)
		if !known {
			fail("kind", "%s is not something a scenario holds; use ResourceFlavor, Cohort, ClusterQueue, LocalQueue or WorkloadPriorityClass", u.GetKind())
			continue
		}
		for _, p := range problems {
			fail(p.Field, "%s", p.Message)
		}
		if len(problems) > 0 {
			continue
		}
		d.addManifest(s, m, u, typed, fail)
	}
}

func (d *decoder) addManifest(s *Scenario, m manifest, u *unstructured.Unstructured, typed any, fail func(field, format string, args ...any)) {
	webhook := func(err error) bool {
		if err == nil {
			return false
		}
		// The webhook's message lists "field: problem" after "... is invalid: ".
		msg := err.Error()
		if _, rest, ok := strings.Cut(msg, " is invalid: "); ok {
			msg = rest
		}
		for _, part := range splitAggregate(strings.Trim(msg, "[]"), "spec.") {
			field, body, _ := strings.Cut(part, ": ")
			fail(field, "%s", body)
		}
		return true
	}
	register := func(path string) {
		d.lines[path] = m.node.Line
		d.lines[child(path, "name")] = m.node.Line
		d.origins = append(d.origins, origin{path: path, name: fmt.Sprintf("%s %s", u.GetKind(), u.GetName())})
	}
	switch obj := typed.(type) {
	case *kueue.ResourceFlavor:
		if obj.Spec.TopologyName != nil {
			fail("spec.topologyName", "topology-aware scheduling is not simulated")
			return
		}
		for _, e := range kueuewebhooks.ValidateResourceFlavor(obj) {
			fail(e.Field, "%s", e.ErrorBody())
			return
		}
		register(index("flavors", len(s.Flavors)))
		s.Flavors = append(s.Flavors, Flavor{Name: obj.Name})
	case *kueue.ClusterQueue:
		if webhook(ValidateClusterQueueObject(u)) {
			return
		}
		cq, notes, err := ClusterQueueFromObject(u)
		if err != nil {
			fail("", "%v", err)
			return
		}
		if len(notes) > 0 {
			for _, n := range notes {
				_, rest, _ := strings.Cut(n, ": ")
				field, problem, _ := strings.Cut(rest, " ")
				fail(field, "%s; leave it out of a scenario", strings.TrimPrefix(problem, "is "))
			}
			return
		}
		register(index("clusterQueues", len(s.ClusterQueues)))
		s.ClusterQueues = append(s.ClusterQueues, cq)
	case *kueue.Cohort:
		if webhook(ValidateCohortObject(u)) {
			return
		}
		c, err := CohortFromObject(u)
		if err != nil {
			fail("", "%v", err)
			return
		}
		register(index("cohorts", len(s.Cohorts)))
		s.Cohorts = append(s.Cohorts, c)
	case *kueue.LocalQueue:
		register(index("localQueues", len(s.LocalQueues)))
		s.LocalQueues = append(s.LocalQueues, LocalQueue{Name: obj.Name, Namespace: obj.Namespace, ClusterQueue: string(obj.Spec.ClusterQueue)})
	case *kueue.WorkloadPriorityClass:
		register(index("priorityClasses", len(s.PriorityClasses)))
		s.PriorityClasses = append(s.PriorityClasses, PriorityClass{Name: obj.Name, Value: obj.Value, Annotations: obj.Annotations})
	case *schedulingv1.PriorityClass:
		register(index("priorityClasses", len(s.PriorityClasses)))
		s.PriorityClasses = append(s.PriorityClasses, PriorityClass{Name: obj.Name, Kind: string(kueue.PodPriorityClassKind), Value: obj.Value, Annotations: obj.Annotations})
	}
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
			for _, k := range sortedKeys(pr) {
				if _, ok := known[k]; !ok {
					problems = append(problems, ManifestProblem{Field: "spec.preemption." + k,
						Message: "unknown field; a Cohort's spec.preemption has " + strings.Join(sortedKeys(known), ", ")})
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

// origin names the manifest a scenario entry was read from, for messages.
type origin struct {
	path string
	name string
}

// nameOrigins rewrites the paths of problems found in entries read from manifests to name the
// manifest: clusterQueues[2].quota[0].flavor becomes ClusterQueue gpu: quota[0].flavor.
func (d *decoder) nameOrigins(errs ErrorList) {
	for _, e := range errs {
		for _, o := range d.origins {
			if rest, ok := strings.CutPrefix(e.Path, o.path); ok && (rest == "" || rest[0] == '.') {
				e.Path = o.name
				if rest != "" {
					e.Path += ": " + rest[1:]
				}
			}
		}
	}
}

// EncodeManifests writes the scenario with its flavors, Cohorts, ClusterQueues, LocalQueues and
// priority classes as Kueue's own manifests, one YAML document each, followed by the scenario's
// own fields and workloads. Parse reads it back.
func (s *Scenario) EncodeManifests() ([]byte, error) {
	objs, err := s.Objects()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	write := func(obj any) error {
		data, err := sigsyaml.Marshal(obj)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(data)
		return nil
	}
	var all []any
	for _, o := range objs.Flavors {
		all = append(all, o)
	}
	for _, o := range objs.Cohorts {
		all = append(all, o.Object)
	}
	for _, o := range objs.ClusterQueues {
		all = append(all, o.Object)
	}
	for _, o := range objs.LocalQueues {
		all = append(all, o)
	}
	for _, o := range objs.WorkloadPriorityClasses {
		all = append(all, o)
	}
	for _, o := range objs.PriorityClasses {
		all = append(all, o)
	}
	for _, o := range all {
		if err := write(withoutEmptyMeta(o)); err != nil {
			return nil, err
		}
	}
	body := *s
	body.Flavors, body.Cohorts, body.ClusterQueues, body.LocalQueues, body.PriorityClasses = nil, nil, nil, nil, nil
	data, err := body.Encode()
	if err != nil {
		return nil, err
	}
	b.WriteString("---\n")
	b.Write(data)
	return b.Bytes(), nil
}

// withoutEmptyMeta drops the empty creationTimestamp and status that typed objects marshal.
func withoutEmptyMeta(obj any) map[string]any {
	data, _ := json.Marshal(obj)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	delete(m, "status")
	return m
}
