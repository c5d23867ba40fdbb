package preemption

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
)

func TestNoticeIndex(t *testing.T) {
	// wl is the informer's view of workload name, with its notice record's message ("": none).
	wl := func(name, record string) *kueue.Workload {
		w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if record != "" {
			w.Status.Conditions = []metav1.Condition{{Type: notice.Condition, Status: metav1.ConditionTrue, Message: record}}
		}
		return w
	}
	synced := func() bool { return true }
	cases := map[string]struct {
		steps func(x *WorkloadIndex)
		want  []workload.Reference
		inUse bool
	}{
		"not in use before it has synced": {
			steps: func(x *WorkloadIndex) { x.Observe(wl("a", "first")) },
		},
		"not in use while the informer has not delivered its list": {
			steps: func(x *WorkloadIndex) { x.SetSynced(func() bool { return false }); x.Observe(wl("a", "first")) },
		},
		"lists the workloads the informer shows under notice": {
			steps: func(x *WorkloadIndex) {
				x.SetSynced(synced)
				x.Observe(wl("a", "first"))
				x.Observe(wl("b", ""))
				x.Observe(wl("c", "first"))
			},
			want: []workload.Reference{"ns/a", "ns/c"}, inUse: true,
		},
		"a notice ended or a workload deleted leaves it": {
			steps: func(x *WorkloadIndex) {
				x.SetSynced(synced)
				x.Observe(wl("a", "first"))
				x.Observe(wl("c", "first"))
				x.Observe(wl("a", ""))
				x.Forget("ns/c")
			},
			want: []workload.Reference{}, inUse: true,
		},
		"a notice written here is listed before the informer shows it": {
			steps: func(x *WorkloadIndex) { x.SetSynced(synced); x.add("ns/a", "second") },
			want:  []workload.Reference{"ns/a"}, inUse: true,
		},
		"views older than a notice written here do not drop it": {
			steps: func(x *WorkloadIndex) {
				x.SetSynced(synced)
				x.add("ns/a", "second")
				x.Observe(wl("a", "first"))
				x.Observe(wl("a", ""))
			},
			want: []workload.Reference{"ns/a"}, inUse: true,
		},
		"once the informer has shown that notice, its end drops it": {
			steps: func(x *WorkloadIndex) {
				x.SetSynced(synced)
				x.add("ns/a", "second")
				x.Observe(wl("a", "second"))
				x.Observe(wl("a", ""))
			},
			want: []workload.Reference{}, inUse: true,
		},
		"taken out of use when its informer stops": {
			steps: func(x *WorkloadIndex) { x.SetSynced(synced); x.Observe(wl("a", "first")); x.SetSynced(nil) },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x := NewWorkloadIndex()
			tc.steps(x)
			got, inUse := x.listed()
			slices.Sort(got)
			if inUse != tc.inUse {
				t.Fatalf("in use = %t, want %t", inUse, tc.inUse)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
		})
	}
}

// With an index in use the preemptor finds its victims under notice through it; without one, or
// before it has synced, by reading every workload: the notice's plugin reads the index through the
// preemptor's handle.
func TestNoticedForThroughTheIndex(t *testing.T) {
	cases := map[string]struct {
		index func() *WorkloadIndex
		want  bool
	}{
		"no index":         {index: func() *WorkloadIndex { return nil }, want: true},
		"index not synced": {index: NewWorkloadIndex, want: true},
		"index listing it": {index: func() *WorkloadIndex {
			x := NewWorkloadIndex()
			x.add("ns/borrower", "n")
			x.SetSynced(func() bool { return true })
			return x
		}, want: true},
		"index listing another": {
			// A synced index is trusted: what it does not list is not looked at.
			index: func() *WorkloadIndex {
				x := NewWorkloadIndex()
				x.add("ns/gone", "n")
				x.SetSynced(func() bool { return true })
				return x
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
			sc := *reclaimScenario("2", false)
			giveNotice(sc.Admitted[0], annotations.Notice{Start: sc.Now, Deadline: sc.Now.Add(time.Minute), Reason: kueue.InCohortReclamationReason,
				Preemptor: "ns/pending", PreemptorUID: "uid-pending"})
			p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, nil, false,
				clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, WithSources(noNoticeSettings{}), WithWorkloadIndex(tc.index()))
			note := notice.Plugin{}.ExplainWait(handle{p, sc.Now, logr.Discard()}, sc.PendingInfo(), snapshotOf(t, ctx, &sc))
			if got := strings.Contains(note, "(ns/borrower)"); got != tc.want {
				t.Errorf("waits on the borrower = %t, want %t (note %q)", got, tc.want, note)
			}
		})
	}
}

// Mark lists a workload in the preemptor's index before its mark can be read back.
func TestHandleMarksInTheIndex(t *testing.T) {
	x := NewWorkloadIndex()
	x.SetSynced(func() bool { return true })
	p := New(nil, workload.Ordering{}, nil, nil, false, clocktesting.NewFakeClock(time.Now()), nil, preemptexpectations.New(), nil, WithWorkloadIndex(x))
	h := handle{p: p}
	h.Mark("ns/victim", "record")
	got, indexed := h.Marked()
	if !indexed {
		t.Fatal("a synced index is not in use")
	}
	if diff := cmp.Diff([]workload.Reference{"ns/victim"}, got); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	// Without an index, nothing is listed and every workload is read.
	if _, indexed := (handle{p: New(nil, workload.Ordering{}, nil, nil, false, clocktesting.NewFakeClock(time.Now()), nil, preemptexpectations.New(), nil)}).Marked(); indexed {
		t.Error("a preemptor without an index says it has one")
	}
}
