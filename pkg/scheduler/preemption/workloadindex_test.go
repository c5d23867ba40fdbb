package preemption

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
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
// before it has synced, by reading every workload.
func TestNoticedForThroughTheIndex(t *testing.T) {
	cases := map[string]struct {
		index func() *WorkloadIndex
		want  []string
	}{
		"no index":         {index: func() *WorkloadIndex { return nil }, want: []string{"borrower"}},
		"index not synced": {index: NewWorkloadIndex, want: []string{"borrower"}},
		"index listing it": {index: func() *WorkloadIndex {
			x := NewWorkloadIndex()
			x.add("ns/borrower", "n")
			x.SetSynced(func() bool { return true })
			return x
		}, want: []string{"borrower"}},
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
				clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, WithPreemptionNotice(noNoticeSettings{}), WithWorkloadIndex(tc.index()))
			var got []string
			for _, n := range p.noticedFor(sc.PendingInfo(), snapshotOf(t, ctx, &sc)) {
				got = append(got, n.info.Obj.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("noticed for the pending workload (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteNoticeListsTheVictim(t *testing.T) {
	ctx := context.Background()
	victim := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "uid-victim"}}
	cl := utiltesting.NewClientBuilder().WithObjects(victim.DeepCopy()).WithStatusSubresource(&kueue.Workload{}).Build()
	if err := cl.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "victim"}, victim); err != nil {
		t.Fatal(err)
	}
	x := NewWorkloadIndex()
	x.SetSynced(func() bool { return true })
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	p := New(cl, workload.Ordering{}, nil, nil, false, clocktesting.NewFakeClock(now), nil, preemptexpectations.New(), nil,
		WithPreemptionNotice(noNoticeSettings{}), WithWorkloadIndex(x))
	n := annotations.Notice{Start: now, Deadline: now.Add(time.Minute), Reason: kueue.InClusterQueueReason, Preemptor: "ns/p", PreemptorUID: "uid-p"}
	if err := p.writeNotice(ctx, victim, n); err != nil {
		t.Fatal(err)
	}
	got, _ := x.listed()
	if diff := cmp.Diff([]workload.Reference{"ns/victim"}, got); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	// The record and the annotations agree: every reader honours the notice as given.
	var written kueue.Workload
	if err := cl.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "victim"}, &written); err != nil {
		t.Fatal(err)
	}
	read, err := notice.Read(&written)
	if err != nil {
		t.Fatalf("notice.Read of the notice written: %v", err)
	}
	if diff := cmp.Diff(&n, read); diff != "" {
		t.Errorf("notice read back (-want +got):\n%s", diff)
	}
	// A second write from the same, now stale, snapshot is refused: no second notice.
	if err := p.writeNotice(ctx, victim, n); !apierrors.IsConflict(err) {
		t.Errorf("writeNotice from a stale snapshot: %v, want a conflict", err)
	}
}
