package v1beta2

import (
	"strings"
	"testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// FuzzExtensions: arbitrary specs never panic the parsers or validators; errors name a field
// under spec.preemption.
func FuzzExtensions(f *testing.F) {
	f.Add([]byte(`{"preemption":{"withinClusterQueueConfig":{"minAdmitDuration":"4h"},"preemptMinRuntime":"10m"}}`), uint8(2))
	f.Add([]byte(`{"preemption":{"reclaimMinRuntime":"-1s"}}`), uint8(0))
	f.Add([]byte(`{"preemption":"x"}`), uint8(1))
	f.Add([]byte(`null`), uint8(3))
	policies := []kueue.PreemptionPolicy{"", kueue.PreemptionPolicyNever, kueue.PreemptionPolicyLowerOrNewerEqualPriority, kueue.PreemptionPolicyLowerPriority}
	f.Fuzz(func(t *testing.T, spec []byte, policy uint8) {
		if ext, err := ParseClusterQueueExtension(spec); err == nil {
			for _, e := range ValidateClusterQueueExtension(ext, &kueue.ClusterQueuePreemption{WithinClusterQueue: policies[int(policy)%len(policies)]}) {
				if !strings.HasPrefix(e.Field, "spec.preemption") {
					t.Fatalf("error outside spec.preemption: %v", e)
				}
			}
		} else if !strings.Contains(err.Error(), "spec.preemption") {
			t.Fatalf("parse error does not name the field: %v", err)
		}
		if ext, err := ParseCohortExtension(spec); err == nil {
			for _, e := range ValidateCohortExtension(ext) {
				if !strings.HasPrefix(e.Field, "spec.preemption.") {
					t.Fatalf("error outside spec.preemption: %v", e)
				}
			}
		} else if !strings.Contains(err.Error(), "spec.preemption") {
			t.Fatalf("parse error does not name the field: %v", err)
		}
	})
}
