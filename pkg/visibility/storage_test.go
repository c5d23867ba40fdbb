package visibility

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityapi "sigs.k8s.io/kueue/apis/visibility/v1beta2"
	utilqueue "sigs.k8s.io/kueue/pkg/util/queue"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeQueues is a queue manager with fixed pending lists.
type fakeQueues struct {
	pending map[kueue.ClusterQueueReference][]*workload.Info
	lqs     map[utilqueue.LocalQueueReference]kueue.ClusterQueueReference
}

func (f fakeQueues) PendingWorkloadsInfo(cq kueue.ClusterQueueReference) []*workload.Info {
	return f.pending[cq]
}

func (f fakeQueues) ClusterQueueFromLocalQueue(lq utilqueue.LocalQueueReference) (kueue.ClusterQueueReference, bool) {
	cq, ok := f.lqs[lq]
	return cq, ok
}

func info(name, ns, lq string, created time.Duration) *workload.Info {
	return workload.NewInfo(utiltestingapi.MakeWorkload(name, ns).UID(types.UID("uid-" + name)).Queue(kueue.LocalQueueName(lq)).
		Priority(5).Creation(epoch.Add(created)).Obj())
}

// position is what the API says of one workload.
type position struct {
	Name            string
	LocalQueue      string
	InClusterQueue  int32
	InLocalQueue    int32
	CreatedAfter    time.Duration
	PriorityIsShown bool
}

func positions(items []visibilityapi.PendingWorkload) []position {
	var out []position
	for _, w := range items {
		out = append(out, position{Name: w.Name, LocalQueue: string(w.LocalQueueName), InClusterQueue: w.PositionInClusterQueue,
			InLocalQueue: w.PositionInLocalQueue, CreatedAfter: w.CreationTimestamp.Sub(epoch), PriorityIsShown: w.Priority == 5})
	}
	return out
}

func TestPendingWorkloads(t *testing.T) {
	queues := fakeQueues{
		pending: map[kueue.ClusterQueueReference][]*workload.Info{
			"cq": {info("a1", "ns", "a", 0), info("b1", "ns", "b", time.Minute), info("a2", "ns", "a", 2*time.Minute),
				info("other-ns", "other", "a", 3*time.Minute), info("a3", "ns", "a", 4*time.Minute)},
			"empty": {},
		},
		lqs: map[utilqueue.LocalQueueReference]kueue.ClusterQueueReference{
			"ns/a": "cq", "ns/b": "cq", "other/a": "cq", "ns/idle": "empty",
		},
	}
	cases := map[string]struct {
		localQueue    string // "" asks the ClusterQueue
		name          string
		offset, limit int64
		want          []position
		wantNotFound  bool
	}{
		"a ClusterQueue, whole": {name: "cq", limit: 100, want: []position{
			{"a1", "a", 0, 0, 0, true}, {"b1", "b", 1, 0, time.Minute, true}, {"a2", "a", 2, 1, 2 * time.Minute, true},
			{"other-ns", "a", 3, 0, 3 * time.Minute, true}, {"a3", "a", 4, 2, 4 * time.Minute, true},
		}},
		"a ClusterQueue from an offset: LocalQueue positions still count those before it": {name: "cq", offset: 2, limit: 2, want: []position{
			{"a2", "a", 2, 1, 2 * time.Minute, true}, {"other-ns", "a", 3, 0, 3 * time.Minute, true},
		}},
		"a ClusterQueue past its end":   {name: "cq", offset: 9, limit: 2, want: nil},
		"an empty ClusterQueue":         {name: "empty", limit: 10, want: nil},
		"an unknown ClusterQueue":       {name: "nope", limit: 10, wantNotFound: true},
		"a negative limit returns none": {name: "cq", limit: -1, want: nil},
		"a LocalQueue of its namespace only": {localQueue: "ns", name: "a", limit: 100, want: []position{
			{"a1", "a", 0, 0, 0, true}, {"a2", "a", 2, 1, 2 * time.Minute, true}, {"a3", "a", 4, 2, 4 * time.Minute, true},
		}},
		"a LocalQueue from an offset": {localQueue: "ns", name: "a", offset: 1, limit: 1, want: []position{
			{"a2", "a", 2, 1, 2 * time.Minute, true},
		}},
		"an unknown LocalQueue": {localQueue: "ns", name: "nope", limit: 10, wantNotFound: true},
	}
	storage := Storage(queues, nil)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := &visibilityapi.PendingWorkloadOptions{Offset: tc.offset, Limit: tc.limit}
			var got any
			var err error
			if tc.localQueue == "" {
				got, err = storage["clusterqueues/pendingworkloads"].(*clusterQueuePending).Get(context.Background(), tc.name, opts)
			} else {
				ctx := genericapirequest.WithNamespace(context.Background(), tc.localQueue)
				got, err = storage["localqueues/pendingworkloads"].(*localQueuePending).Get(ctx, tc.name, opts)
			}
			if tc.wantNotFound {
				if !errors.IsNotFound(err) {
					t.Fatalf("Get error = %v, want NotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if diff := cmp.Diff(tc.want, positions(got.(*visibilityapi.PendingWorkloadsSummary).Items)); diff != "" {
				t.Errorf("positions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOrdered(t *testing.T) {
	// rotated was created first but preempted for time-sharing after waiting was created.
	rotated := info("rotated", "ns", "a", 0)
	rotated.Obj.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue,
		Reason: timebased.Reason, LastTransitionTime: metav1.NewTime(epoch.Add(time.Hour))}}
	waiting := info("waiting", "ns", "a", time.Minute)
	queues := fakeQueues{
		pending: map[kueue.ClusterQueueReference][]*workload.Info{"turns": {rotated, waiting}, "plain": {rotated, waiting}},
		lqs:     map[utilqueue.LocalQueueReference]kueue.ClusterQueueReference{"ns/a": "turns"},
	}
	// The scheduler's order, as the manager gives it: turn order where the ClusterQueue takes turns.
	src := Ordered{Queues: queues, Order: func(cq kueue.ClusterQueueReference, pending []*workload.Info) []*workload.Info {
		if cq != "turns" {
			return pending
		}
		return preemption.TurnOrder(logr.Discard(), pending, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp})
	}}
	cases := map[kueue.ClusterQueueReference][]string{
		"turns":   {"waiting", "rotated"},
		"plain":   {"rotated", "waiting"},
		"unknown": nil,
	}
	for cq, want := range cases {
		t.Run(string(cq), func(t *testing.T) {
			var got []string
			for _, i := range src.PendingWorkloadsInfo(cq) {
				got = append(got, i.Obj.Name)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
	if cq, ok := src.ClusterQueueFromLocalQueue("ns/a"); !ok || cq != "turns" {
		t.Errorf("ClusterQueueFromLocalQueue = %q, %v; want turns, true", cq, ok)
	}
}

// fakeEstimates has fixed estimates and counts the requests.
type fakeEstimates struct {
	byCQ  map[kueue.ClusterQueueReference]map[string]estimate.Estimate
	asked *int
}

func (f fakeEstimates) Estimates(cq kueue.ClusterQueueReference) map[string]estimate.Estimate {
	*f.asked++
	return f.byCQ[cq]
}

func TestPendingWorkloadsEstimates(t *testing.T) {
	queues := fakeQueues{
		pending: map[kueue.ClusterQueueReference][]*workload.Info{
			"cq": {info("a1", "ns", "a", 0), info("a2", "ns", "a", time.Minute), info("a3", "ns", "a", 2*time.Minute)},
		},
		lqs: map[utilqueue.LocalQueueReference]kueue.ClusterQueueReference{"ns/a": "cq"},
	}
	known := estimate.Estimate{Workload: "ns/a1", Position: 1, When: time.Date(2026, 1, 1, 14, 5, 0, 0, time.FixedZone("x", 3600)),
		Reason: "waits for ns/h", Sentence: "expected around 13:05, 1st in turn order"}
	unknown := estimate.Estimate{Workload: "ns/a2", Position: 2, Unknown: true, Reason: "held by ns/h, which declares no runtime and has no window"}
	byCQ := map[kueue.ClusterQueueReference]map[string]estimate.Estimate{"cq": {"ns/a1": known, "ns/a2": unknown}}
	annotated := map[string]map[string]string{
		"a1": {annotations.EstimatedAdmission: "2026-01-01T13:05:00Z", annotations.AdmissionEstimate: "expected around 13:05, 1st in turn order"},
		"a2": {annotations.EstimatedAdmission: "unknown", annotations.AdmissionEstimate: "held by ns/h, which declares no runtime and has no window"},
		"a3": nil,
	}
	cases := map[string]struct {
		localQueue string
		estimates  bool
		limit      int64
		want       map[string]map[string]string
		wantAsked  int
	}{
		"without estimates: no annotations":      {limit: 10, want: map[string]map[string]string{"a1": nil, "a2": nil, "a3": nil}},
		"a ClusterQueue: known, unknown, none":   {estimates: true, limit: 10, want: annotated, wantAsked: 1},
		"a LocalQueue":                           {localQueue: "ns", estimates: true, limit: 10, want: annotated, wantAsked: 1},
		"nothing listed: estimates not computed": {estimates: true, limit: 0, want: map[string]map[string]string{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			asked := 0
			var est Estimates
			if tc.estimates {
				est = fakeEstimates{byCQ: byCQ, asked: &asked}
			}
			storage := Storage(queues, est)
			opts := &visibilityapi.PendingWorkloadOptions{Limit: tc.limit}
			var got runtime.Object
			var err error
			if tc.localQueue == "" {
				got, err = storage["clusterqueues/pendingworkloads"].(*clusterQueuePending).Get(context.Background(), "cq", opts)
			} else {
				ctx := genericapirequest.WithNamespace(context.Background(), tc.localQueue)
				got, err = storage["localqueues/pendingworkloads"].(*localQueuePending).Get(ctx, "a", opts)
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			gotAnnotations := map[string]map[string]string{}
			for _, w := range got.(*visibilityapi.PendingWorkloadsSummary).Items {
				gotAnnotations[w.Name] = w.Annotations
			}
			if diff := cmp.Diff(tc.want, gotAnnotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if asked != tc.wantAsked {
				t.Errorf("estimates asked %d times, want %d", asked, tc.wantAsked)
			}
		})
	}
}
