package v1beta2

import (
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Field is one of kueue-timeshare's fields in a Kueue kind: the object that holds it (Parent, a
// path from the object's root), its name there and its schema. It lives at the same path in
// every served version of the kind.
type Field struct {
	Parent []string
	Name   string
	Schema apiextensionsv1.JSONSchemaProps
	// ParentRules are validation rules the field needs on its parent object, because they
	// relate it to its siblings.
	ParentRules apiextensionsv1.ValidationRules
}

// Path is the field's full path, for example [spec preemption preemptMinRuntime].
func (f Field) Path() []string {
	return append(slices.Clone(f.Parent), f.Name)
}

// String is the dotted path, as field errors write it.
func (f Field) String() string {
	return strings.Join(f.Path(), ".")
}

// sharedGroups are the groups of fields that ClusterQueues and Cohorts share in spec.preemption
// besides the min-runtimes, each registered by its feature's file with its printer columns.
var sharedGroups []sharedGroup

type sharedGroup struct {
	properties func() map[string]apiextensionsv1.JSONSchemaProps
	columns    []apiextensionsv1.CustomResourceColumnDefinition
}

// Fields lists kueue-timeshare's fields by Kueue kind. It is the one place a field is declared:
// hack/crdpatch adds each to every version of its kind's CRD, and the manager's conversion
// webhook carries each unchanged between versions (upstream's types, which it converts with,
// lack them). Within a kind, fields are sorted by path.
func Fields() map[string][]Field {
	preemption := []string{"spec", "preemption"}
	cq := []Field{{Parent: preemption, Name: "withinClusterQueueConfig", Schema: WithinClusterQueueConfigSchema(),
		ParentRules: WithinClusterQueueConfigParentRules()}}
	for name, s := range MinRuntimeSchemaProperties() {
		cq = append(cq, Field{Parent: preemption, Name: name, Schema: s})
	}
	for _, g := range sharedGroups {
		for name, s := range g.properties() {
			cq = append(cq, Field{Parent: preemption, Name: name, Schema: s})
		}
	}
	fields := map[string][]Field{
		"ClusterQueue": cq,
		// Upstream's Cohort has no spec.preemption: all of it is ours.
		"Cohort": {{Parent: []string{"spec"}, Name: "preemption", Schema: CohortPreemptionSchema()}},
	}
	for _, fs := range fields {
		slices.SortFunc(fs, func(a, b Field) int { return strings.Compare(a.String(), b.String()) })
	}
	return fields
}

// PrinterColumns are the columns kubectl get shows for kueue-timeshare's fields, by Kueue kind;
// hack/crdpatch appends them to upstream's in every version (the paths are the same in all).
func PrinterColumns() map[string][]apiextensionsv1.CustomResourceColumnDefinition {
	minRuntimes := func(priority int32) []apiextensionsv1.CustomResourceColumnDefinition {
		cols := []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Preempt Min Runtime", Type: "string", Priority: priority, JSONPath: ".spec.preemption.preemptMinRuntime",
				Description: "Protection against preemption within the ClusterQueue, where set here (kueue-timeshare)"},
			{Name: "Reclaim Min Runtime", Type: "string", Priority: priority, JSONPath: ".spec.preemption.reclaimMinRuntime",
				Description: "Protection against reclaim by other ClusterQueues, where set here (kueue-timeshare)"},
		}
		for _, g := range sharedGroups {
			cols = append(cols, g.columns...)
		}
		return cols
	}
	return map[string][]apiextensionsv1.CustomResourceColumnDefinition{
		"ClusterQueue": append([]apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Min Admit Duration", Type: "string", JSONPath: ".spec.preemption.withinClusterQueueConfig.minAdmitDuration",
				Description: "Time-sharing window: how long a workload keeps its quota before one of the same priority may preempt it (kueue-timeshare)"},
		}, minRuntimes(1)...),
		// Upstream's Cohort has no columns: its parent helps to read the tree.
		"Cohort": append([]apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Parent", Type: "string", JSONPath: ".spec.parentName", Description: "The parent Cohort"},
		}, minRuntimes(0)...),
	}
}
