package toleration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

func TestStore(t *testing.T) {
	s := NewStore()
	ann := map[string]string{annotations.MinimumPreemptablePriority: "10000", annotations.TolerationSeconds: "600"}
	tol, problem := toleration(kueue.WorkloadPriorityClassKind, "low-10min", ann, 8000)
	if problem != "" {
		t.Fatalf("unexpected problem %q", problem)
	}
	s.set(key{kueue.WorkloadPriorityClassKind, "low-10min"}, tol)
	want := &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 10000, Duration: 10 * time.Minute},
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
	s.forget(key{kueue.WorkloadPriorityClassKind, "low-10min"})
	if got := s.For(kueue.NewWorkloadPriorityClassRef("low-10min")); got != nil {
		t.Errorf("after deletion: %v, want none", got)
	}
}

func TestSet(t *testing.T) {
	cases := map[string]struct {
		kind    kueue.PriorityClassKind
		ann     map[string]string
		want    *Toleration
		wantErr string
	}{
		"a WorkloadPriorityClass that tolerates for ten minutes": {
			kind: kueue.WorkloadPriorityClassKind,
			ann:  map[string]string{annotations.MinimumPreemptablePriority: "10000", annotations.TolerationSeconds: "600"},
			want: &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 10000, Duration: 10 * time.Minute},
				Source: "WorkloadPriorityClass c"},
		},
		"a PriorityClass that tolerates forever": {
			kind: kueue.PodPriorityClassKind,
			ann:  map[string]string{annotations.TolerationSeconds: "-1"},
			want: &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 101, Forever: true},
				Source: "PriorityClass c"},
		},
		"no annotations: nothing tolerated": {kind: kueue.WorkloadPriorityClassKind},
		"invalid annotations: nothing tolerated, and the error names the annotation": {
			kind:    kueue.WorkloadPriorityClassKind,
			ann:     map[string]string{annotations.TolerationSeconds: "1h"},
			wantErr: `metadata.annotations[preemption-toleration.scheduling.x-k8s.io/toleration-seconds]: Invalid value: "1h": must be a 64-bit integer (seconds; negative: forever)`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewStore()
			err := s.Set(tc.kind, "c", tc.ann, 100)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, s.For(&kueue.PriorityClassRef{Kind: tc.kind, Name: "c"})); diff != "" {
				t.Errorf("toleration (-want +got):\n%s", diff)
			}
		})
	}
}
