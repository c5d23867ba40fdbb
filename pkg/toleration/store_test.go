package toleration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption/policy"
)

func TestStore(t *testing.T) {
	s := NewStore()
	ann := map[string]string{annotations.MinimumPreemptablePriority: "10000", annotations.TolerationSeconds: "600"}
	tol, problem := toleration(kueue.WorkloadPriorityClassKind, "low-10min", ann, 8000)
	if problem != "" {
		t.Fatalf("unexpected problem %q", problem)
	}
	s.set(key{kueue.WorkloadPriorityClassKind, "low-10min"}, tol)
	want := &policy.Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 10000, Duration: 10 * time.Minute},
		Source: "WorkloadPriorityClass low-10min"}
	if diff := cmp.Diff(want, s.For(kueue.NewWorkloadPriorityClassRef("low-10min"))); diff != "" {
		t.Errorf("toleration (-want +got):\n%s", diff)
	}
	// A PriorityClass of the same name is another class.
	if got := s.For(&kueue.PriorityClassRef{Kind: kueue.PodPriorityClassKind, Name: "low-10min"}); got != nil {
		t.Errorf("PriorityClass low-10min: %v, want none", got)
	}
	if got := s.For(nil); got != nil {
		t.Errorf("no class: %v, want none", got)
	}

	bad, problem := toleration(kueue.PodPriorityClassKind, "bad", map[string]string{annotations.TolerationSeconds: "1h"}, 1)
	if bad != nil || problem == "" {
		t.Errorf("invalid annotations: got %v, %q; want no toleration and a problem", bad, problem)
	}
	// A class without toleration seconds tolerates nothing, so it is not kept.
	none, _ := toleration(kueue.PodPriorityClassKind, "plain", map[string]string{annotations.MinimumPreemptablePriority: "5"}, 1)
	s.set(key{kueue.PodPriorityClassKind, "plain"}, none)
	if got := s.For(&kueue.PriorityClassRef{Kind: kueue.PodPriorityClassKind, Name: "plain"}); got != nil {
		t.Errorf("class without toleration seconds: %v, want none", got)
	}
	s.set(key{kueue.WorkloadPriorityClassKind, "low-10min"}, nil)
	if got := s.For(kueue.NewWorkloadPriorityClassRef("low-10min")); got != nil {
		t.Errorf("after deletion: %v, want none", got)
	}
}
