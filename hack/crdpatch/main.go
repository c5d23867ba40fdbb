// Command crdpatch adds kueue-timeshare's fields to the CRDs copied from the Kueue module by
// `make manifests`, in every served version, so that the API server keeps them (no pruning),
// validates their shape and `kubectl explain` describes them.
//
//	go run ./hack/crdpatch <crd directory>
package main

import (
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch <crd directory>")
		os.Exit(2)
	}
	patches := map[string]func(*apiextensionsv1.CustomResourceDefinition) error{
		"kueue.x-k8s.io_clusterqueues.yaml": AddClusterQueueFields,
		"kueue.x-k8s.io_cohorts.yaml":       AddCohortFields,
	}
	for file, add := range patches {
		if err := patchFile(filepath.Join(os.Args[1], file), add); err != nil {
			fmt.Fprintf(os.Stderr, "crdpatch: %v\n", err)
			os.Exit(1)
		}
	}
}

func patchFile(path string, add func(*apiextensionsv1.CustomResourceDefinition) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := add(&crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// AddClusterQueueFields puts withinClusterQueueConfig and the min-runtimes under spec.preemption of
// every version.
func AddClusterQueueFields(crd *apiextensionsv1.CustomResourceDefinition) error {
	return editPreemption(crd, "ClusterQueue", func(preemption *apiextensionsv1.JSONSchemaProps) {
		preemption.Properties["withinClusterQueueConfig"] = tsapi.WithinClusterQueueConfigSchema()
		for name, prop := range tsapi.MinRuntimeSchemaProperties() {
			preemption.Properties[name] = prop
		}
	})
}

// AddCohortFields gives Cohorts a spec.preemption with the min-runtimes, in every version.
func AddCohortFields(crd *apiextensionsv1.CustomResourceDefinition) error {
	return editPreemption(crd, "Cohort", func(preemption *apiextensionsv1.JSONSchemaProps) {
		*preemption = tsapi.CohortPreemptionSchema()
	})
}

// editPreemption lets edit change spec.preemption (empty if the kind has none) in every version.
func editPreemption(crd *apiextensionsv1.CustomResourceDefinition, kind string, edit func(*apiextensionsv1.JSONSchemaProps)) error {
	if crd.Spec.Names.Kind != kind {
		return fmt.Errorf("expected the %s CRD, got %q", kind, crd.Spec.Names.Kind)
	}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return fmt.Errorf("version %s has no schema", v.Name)
		}
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return fmt.Errorf("version %s: no spec in schema", v.Name)
		}
		preemption := spec.Properties["preemption"]
		if preemption.Properties == nil {
			preemption.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		}
		edit(&preemption)
		spec.Properties["preemption"] = preemption
		v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	return nil
}
