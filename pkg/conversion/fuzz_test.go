package conversion

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// FuzzConvertObject: any object, in either direction, is converted or refused with an error, never
// a panic; a converted object keeps every one of our fields it had, unchanged.
func FuzzConvertObject(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"a"},"spec":{"preemption":{"withinClusterQueueConfig":{"minAdmitDuration":"5m"},"preemptMinRuntime":"1m"}}}`), true)
	f.Add([]byte(`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Cohort","metadata":{"name":"b"},"spec":{"preemption":{"reclaimMinRuntime":"1h"}}}`), false)
	f.Add([]byte(`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Cohort","spec":{"preemption":null}}`), false)
	f.Add([]byte(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","spec":{"podSets":[{"count":1e3}]}}`), true)
	f.Add([]byte(`{"kind":"LocalQueue","spec":[]}`), true)
	f.Add([]byte(`null`), false)
	s := runtime.NewScheme()
	if err := kueuev1beta1.AddToScheme(s); err != nil {
		f.Fatal(err)
	}
	if err := kueuev1beta2.AddToScheme(s); err != nil {
		f.Fatal(err)
	}
	h := NewHandler(s, logr.Discard())
	f.Fuzz(func(t *testing.T, raw []byte, toV1beta2 bool) {
		desired := schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta1"}
		if toV1beta2 {
			desired.Version = "v1beta2"
		}
		out, err := h.convertObject(raw, desired)
		if err != nil {
			return
		}
		in, err := decodeMap(raw)
		if err != nil {
			t.Fatalf("converted an object that is not JSON: %s", raw)
		}
		got, err := decodeMap(out)
		if err != nil {
			t.Fatalf("output is not a JSON object: %s", out)
		}
		kind, _ := in["kind"].(string)
		apiVersion, _ := in["apiVersion"].(string)
		for _, field := range h.Fields[kind] {
			if !strings.HasPrefix(apiVersion, "kueue.x-k8s.io/") {
				break
			}
			want, found, _ := take(in, field.Path())
			if !found {
				continue
			}
			have, ok, _ := take(got, field.Path())
			if !ok {
				t.Fatalf("%s lost: %s -> %s", field, raw, out)
			}
			if diff := cmp.Diff(want, have); diff != "" {
				t.Fatalf("%s changed (-in +out):\n%s", field, diff)
			}
		}
	})
}
