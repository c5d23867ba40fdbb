package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

// kueueCRD reads kind's CRD as shipped in the Kueue module this project builds against.
func kueueCRD(t *testing.T, kind string) (path string, data []byte) {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	if err != nil {
		t.Fatalf("locating the kueue module: %v", err)
	}
	path = filepath.Join(strings.TrimSpace(string(dir)), "config/components/crd/bases", CRDFile(kind))
	data, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data
}

func schemaAt(root apiextensionsv1.JSONSchemaProps, path []string) (apiextensionsv1.JSONSchemaProps, bool) {
	for _, name := range path {
		child, ok := root.Properties[name]
		if !ok {
			return child, false
		}
		root = child
	}
	return root, true
}

// Every declared field lands, with its schema, at the same path in every version of its kind's
// CRD as shipped by Kueue, and upstream's own fields beside it stay.
func TestPatchesEveryVersionOfKueuesCRDs(t *testing.T) {
	keep := map[string][]string{
		"ClusterQueue": {"spec.preemption.withinClusterQueue", "spec.preemption.reclaimWithinCohort", "spec.resourceGroups"},
		"Cohort":       {"spec.parentName", "spec.resourceGroups"},
	}
	for kind, fields := range tsapi.Fields() {
		t.Run(kind, func(t *testing.T) {
			_, data := kueueCRD(t, kind)
			path := filepath.Join(t.TempDir(), CRDFile(kind))
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := patchFile(path, func(crd *apiextensionsv1.CustomResourceDefinition) error { return AddFields(crd, kind, fields) }); err != nil {
				t.Fatal(err)
			}
			out, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.UnmarshalStrict(out, &crd); err != nil {
				t.Fatal(err)
			}
			if len(crd.Spec.Versions) < 2 {
				t.Fatalf("expected v1beta1 and v1beta2, got %d versions", len(crd.Spec.Versions))
			}
			for _, v := range crd.Spec.Versions {
				for _, f := range fields {
					got, ok := schemaAt(*v.Schema.OpenAPIV3Schema, f.Path())
					if !ok {
						t.Errorf("%s: %s missing", v.Name, f)
						continue
					}
					if diff := cmp.Diff(f.Schema, got); diff != "" {
						t.Errorf("%s: %s schema (-want +got):\n%s", v.Name, f, diff)
					}
					parent, _ := schemaAt(*v.Schema.OpenAPIV3Schema, f.Parent)
					for _, r := range f.ParentRules {
						if !slices.Contains(parent.XValidations, r) {
							t.Errorf("%s: rule %q of %s missing on its parent", v.Name, r.Rule, f)
						}
					}
				}
				if kind == "ClusterQueue" {
					// Upstream's own rule on spec.preemption stays beside ours.
					p, _ := schemaAt(*v.Schema.OpenAPIV3Schema, []string{"spec", "preemption"})
					if !slices.ContainsFunc(p.XValidations, func(r apiextensionsv1.ValidationRule) bool {
						return strings.Contains(r.Rule, "reclaimWithinCohort")
					}) {
						t.Errorf("%s: upstream's rule on spec.preemption lost", v.Name)
					}
				}
				for _, p := range keep[kind] {
					if _, ok := schemaAt(*v.Schema.OpenAPIV3Schema, strings.Split(p, ".")); !ok {
						t.Errorf("%s: upstream's %s lost", v.Name, p)
					}
				}
			}
		})
	}
}

// The declared schemas say what kubectl explain shows: each leaf has a description, each
// duration a pattern and each count a minimum; objects are walked down to their leaves.
func TestFieldSchemas(t *testing.T) {
	var check func(kind string, f tsapi.Field, name string, d apiextensionsv1.JSONSchemaProps)
	check = func(kind string, f tsapi.Field, name string, d apiextensionsv1.JSONSchemaProps) {
		if d.Type == "object" {
			if len(d.Properties) == 0 {
				t.Errorf("%s %s: %s has no properties", kind, f, name)
			}
			for n, p := range d.Properties {
				check(kind, f, name+"."+n, p)
			}
			return
		}
		duration := d.Type == "string" && d.Pattern != ""
		count := d.Type == "integer" && d.Minimum != nil
		if !(duration || count || d.Type == "boolean") || d.Description == "" {
			t.Errorf("%s %s: %s schema %+v", kind, f, name, d)
		}
	}
	for kind, fields := range tsapi.Fields() {
		for _, f := range fields {
			check(kind, f, f.Name, f.Schema)
		}
	}
}

func TestRefusesWhatItCannotPatchFaithfully(t *testing.T) {
	field := tsapi.Field{Parent: []string{"spec", "preemption"}, Name: "x", Schema: apiextensionsv1.JSONSchemaProps{Type: "string"}}
	object := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	crd := func(kind string, root apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Kind: kind},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &root}}},
		}}
	}
	cases := map[string]struct {
		crd  *apiextensionsv1.CustomResourceDefinition
		want string
	}{
		"another kind": {
			crd:  crd("LocalQueue", object(nil)),
			want: `expected the ClusterQueue CRD, got "LocalQueue"`,
		},
		"no parent in a version": {
			crd:  crd("ClusterQueue", object(map[string]apiextensionsv1.JSONSchemaProps{"spec": object(nil)})),
			want: "version v1: spec.preemption.x: spec.preemption is not an object in the schema",
		},
		"upstream has the field already": {
			crd: crd("ClusterQueue", object(map[string]apiextensionsv1.JSONSchemaProps{"spec": object(map[string]apiextensionsv1.JSONSchemaProps{
				"preemption": object(map[string]apiextensionsv1.JSONSchemaProps{"x": {Type: "integer"}})})})),
			want: "version v1: spec.preemption.x is already in the schema",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := AddFields(tc.crd, "ClusterQueue", []tsapi.Field{field})
			if err == nil || err.Error() != tc.want {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// Columns land after upstream's in every version, whose columns stay; each points at a field
// that exists in that version's schema.
func TestPrinterColumns(t *testing.T) {
	for kind, columns := range tsapi.PrinterColumns() {
		t.Run(kind, func(t *testing.T) {
			_, data := kueueCRD(t, kind)
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.UnmarshalStrict(data, &crd); err != nil {
				t.Fatal(err)
			}
			upstream := map[string]int{}
			for _, v := range crd.Spec.Versions {
				upstream[v.Name] = len(v.AdditionalPrinterColumns)
			}
			if err := AddFields(&crd, kind, tsapi.Fields()[kind]); err != nil {
				t.Fatal(err)
			}
			if err := AddPrinterColumns(&crd, columns); err != nil {
				t.Fatal(err)
			}
			for _, v := range crd.Spec.Versions {
				got := v.AdditionalPrinterColumns[upstream[v.Name]:]
				if diff := cmp.Diff(columns, got); diff != "" {
					t.Errorf("%s: columns (-want +got):\n%s", v.Name, diff)
				}
				for _, c := range got {
					if _, ok := schemaAt(*v.Schema.OpenAPIV3Schema, strings.Split(strings.TrimPrefix(c.JSONPath, "."), ".")); !ok {
						t.Errorf("%s: column %q reads %s, which is not in the schema", v.Name, c.Name, c.JSONPath)
					}
				}
			}
			if err := AddPrinterColumns(&crd, columns[:1]); err == nil || !strings.Contains(err.Error(), "exists already") {
				t.Errorf("adding a column twice: got %v", err)
			}
		})
	}
}
