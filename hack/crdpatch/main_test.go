package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The patch runs on the CRD shipped in the Kueue module this project builds against.
func TestPatchesEveryVersionOfKueuesClusterQueueCRD(t *testing.T) {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	if err != nil {
		t.Fatalf("locating the kueue module: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(dir)), "config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kueue.x-k8s.io_clusterqueues.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := patchFile(path, AddClusterQueueFields); err != nil {
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
		p := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["preemption"]
		got, ok := p.Properties["withinClusterQueueConfig"]
		if !ok {
			t.Errorf("%s: withinClusterQueueConfig missing", v.Name)
			continue
		}
		if d := got.Properties["minAdmitDuration"]; d.Type != "string" || d.Pattern == "" || !strings.Contains(d.Description, "QuotaReserved") {
			t.Errorf("%s: minAdmitDuration schema %+v", v.Name, d)
		}
		for _, name := range []string{"preemptMinRuntime", "reclaimMinRuntime"} {
			if d := p.Properties[name]; d.Type != "string" || d.Pattern == "" || !strings.Contains(d.Description, "Admitted") {
				t.Errorf("%s: %s schema %+v", v.Name, name, d)
			}
		}
		// Upstream's own fields stay.
		if _, ok := p.Properties["withinClusterQueue"]; !ok {
			t.Errorf("%s: withinClusterQueue lost", v.Name)
		}
	}
}

func TestGivesCohortsAPreemptionSection(t *testing.T) {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	if err != nil {
		t.Fatalf("locating the kueue module: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "config/components/crd/bases/kueue.x-k8s.io_cohorts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatal(err)
	}
	if err := AddCohortFields(&crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		p := spec.Properties["preemption"]
		if p.Type != "object" || len(p.Properties) != 2 || p.Properties["reclaimMinRuntime"].Pattern == "" {
			t.Errorf("%s: spec.preemption schema %+v", v.Name, p)
		}
		if _, ok := spec.Properties["parentName"]; !ok {
			t.Errorf("%s: parentName lost", v.Name)
		}
	}
}

func TestRejectsOtherCRDs(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "LocalQueue"}}}
	if err := AddClusterQueueFields(crd); err == nil || !strings.Contains(err.Error(), "LocalQueue") {
		t.Errorf("got %v, want an error naming the wrong kind", err)
	}
}
