// Command crdpatch adds kueue-timeshare's fields (apis/kueue/v1beta2.Fields) to the CRDs copied
// from the Kueue module by `make manifests`, in every served version, so that the API server
// keeps them (no pruning), validates their shape and `kubectl explain` describes them.
//
//	go run ./hack/crdpatch <crd directory>
package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch <crd directory>")
		os.Exit(2)
	}
	fields, columns := tsapi.Fields(), tsapi.PrinterColumns()
	kinds := slices.Sorted(maps.Keys(fields))
	for kind := range columns {
		if _, ok := fields[kind]; !ok {
			kinds = append(kinds, kind)
		}
	}
	for _, kind := range kinds {
		err := patchFile(filepath.Join(os.Args[1], CRDFile(kind)), func(crd *apiextensionsv1.CustomResourceDefinition) error {
			if err := AddFields(crd, kind, fields[kind]); err != nil {
				return err
			}
			return AddPrinterColumns(crd, columns[kind])
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "crdpatch: %v\n", err)
			os.Exit(1)
		}
	}
}

// CRDFile is the name of kind's CRD in Kueue's config/components/crd/bases.
func CRDFile(kind string) string {
	return "kueue.x-k8s.io_" + strings.ToLower(kind) + "s.yaml"
}

func patchFile(path string, patch func(*apiextensionsv1.CustomResourceDefinition) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := patch(&crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// AddFields puts fields, and the rules they need on their parents, into every version of kind's CRD. Each field's parent must already be an
// object in every version, so that the field sits at the same path in all of them (which the
// conversion webhook relies on), and the field itself must not exist yet: a field upstream
// added under the same name would otherwise be silently replaced.
func AddFields(crd *apiextensionsv1.CustomResourceDefinition, kind string, fields []tsapi.Field) error {
	if crd.Spec.Names.Kind != kind {
		return fmt.Errorf("expected the %s CRD, got %q", kind, crd.Spec.Names.Kind)
	}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return fmt.Errorf("version %s has no schema", v.Name)
		}
		for _, f := range fields {
			if err := addField(v.Schema.OpenAPIV3Schema, f); err != nil {
				return fmt.Errorf("version %s: %w", v.Name, err)
			}
		}
	}
	return nil
}

func addField(root *apiextensionsv1.JSONSchemaProps, f tsapi.Field) error {
	return setProperty(root, f.Parent, f, 0)
}

// setProperty walks down path from obj (path[:depth] already walked) and adds f at its end.
// Properties are map values: each level is edited as a copy and stored back.
func setProperty(obj *apiextensionsv1.JSONSchemaProps, path []string, f tsapi.Field, depth int) error {
	if depth == len(path) {
		if _, exists := obj.Properties[f.Name]; exists {
			return fmt.Errorf("%s is already in the schema", f)
		}
		if obj.Properties == nil {
			obj.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		}
		obj.Properties[f.Name] = f.Schema
		obj.XValidations = append(obj.XValidations, f.ParentRules...)
		return nil
	}
	child, ok := obj.Properties[path[depth]]
	if !ok || child.Type != "object" {
		return fmt.Errorf("%s: %s is not an object in the schema", f, strings.Join(path[:depth+1], "."))
	}
	if err := setProperty(&child, path, f, depth+1); err != nil {
		return err
	}
	obj.Properties[path[depth]] = child
	return nil
}

// AddPrinterColumns appends columns to every version's, refusing a name upstream already uses.
func AddPrinterColumns(crd *apiextensionsv1.CustomResourceDefinition, columns []apiextensionsv1.CustomResourceColumnDefinition) error {
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		for _, c := range columns {
			if slices.ContainsFunc(v.AdditionalPrinterColumns, func(u apiextensionsv1.CustomResourceColumnDefinition) bool { return u.Name == c.Name }) {
				return fmt.Errorf("version %s: printer column %q exists already", v.Name, c.Name)
			}
			v.AdditionalPrinterColumns = append(v.AdditionalPrinterColumns, c)
		}
	}
	return nil
}
