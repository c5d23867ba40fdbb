package preemption

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

func TestTurnOrder(t *testing.T) {
	// wl is a pending workload created `created` after the epoch and, unless rotated is zero,
	// preempted for time-sharing `rotated` after the epoch.
	wl := func(name string, prio int32, created, rotated time.Duration) *kueue.Workload {
		w := utiltestingapi.MakeWorkload(name, "ns").UID(types.UID("uid-" + name)).Priority(prio).
			Creation(snapgen.Epoch.Add(created)).Obj()
		if rotated != 0 {
			w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue,
				Reason: timebased.Reason, LastTransitionTime: metav1.NewTime(snapgen.Epoch.Add(rotated))}}
		}
		return w
	}
	upstreamPreempted := wl("upstream-preempted", 10, 0, 0)
	upstreamPreempted.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue,
		Reason: kueue.InClusterQueueReason, LastTransitionTime: metav1.NewTime(snapgen.Epoch.Add(5 * time.Hour))}}

	cases := map[string]struct {
		// queue is the queue's own order (priority, then creation).
		queue []*kueue.Workload
		want  []string
	}{
		"nobody rotated out: the queue's order": {
			queue: []*kueue.Workload{wl("a", 10, 0, 0), wl("b", 10, time.Hour, 0), wl("c", 1, 0, 0)},
			want:  []string{"a", "b", "c"},
		},
		"a rotated-out head goes behind those that waited since before it was preempted": {
			queue: []*kueue.Workload{wl("rotated", 10, 0, 2*time.Hour), wl("since-30m", 10, 30*time.Minute, 0),
				wl("since-1h", 10, time.Hour, 0), wl("since-3h", 10, 3*time.Hour, 0)},
			want: []string{"since-30m", "since-1h", "rotated", "since-3h"},
		},
		"two rotated out: the one preempted first goes first": {
			queue: []*kueue.Workload{wl("rotated-at-3h", 10, 0, 3*time.Hour), wl("rotated-at-2h", 10, time.Minute, 2*time.Hour),
				wl("since-30m", 10, 30*time.Minute, 0)},
			want: []string{"since-30m", "rotated-at-2h", "rotated-at-3h"},
		},
		"a rotated-out head whose turn comes first keeps its place": {
			queue: []*kueue.Workload{wl("rotated", 10, 0, 10*time.Minute), wl("since-30m", 10, 30*time.Minute, 0)},
			want:  []string{"rotated", "since-30m"},
		},
		"turns are taken within a priority only": {
			queue: []*kueue.Workload{wl("high", 20, 4*time.Hour, 0), wl("rotated", 10, 0, 2*time.Hour),
				wl("since-1h", 10, time.Hour, 0), wl("low", 1, 0, 0)},
			want: []string{"high", "since-1h", "rotated", "low"},
		},
		"a higher-priority workload rotated out does not pass lower priorities": {
			queue: []*kueue.Workload{wl("high-rotated", 20, 0, 3*time.Hour), wl("low", 1, 0, 0)},
			want:  []string{"high-rotated", "low"},
		},
		"simultaneous turns: smaller UID first": {
			queue: []*kueue.Workload{wl("z-rotated", 10, 0, time.Hour), wl("b-rotated", 10, time.Minute, time.Hour),
				wl("a-rotated", 10, 2*time.Minute, time.Hour)},
			want: []string{"a-rotated", "b-rotated", "z-rotated"},
		},
		"rotated out in the second another joined: behind it, whatever the UIDs": {
			queue: []*kueue.Workload{wl("a-rotated", 10, 0, time.Hour), wl("z-joined", 10, time.Hour, 0)},
			want:  []string{"z-joined", "a-rotated"},
		},
		"rotated out in the second another joined, that one rotated out too: smaller UID first": {
			queue: []*kueue.Workload{wl("z-rotated", 10, 0, time.Hour), wl("a-joined", 10, time.Hour, 0),
				wl("b-rotated", 10, time.Minute, time.Hour)},
			want: []string{"a-joined", "b-rotated", "z-rotated"},
		},
		"preempted for another reason: the queue's order": {
			queue: []*kueue.Workload{upstreamPreempted, wl("since-1h", 10, time.Hour, 0)},
			want:  []string{"upstream-preempted", "since-1h"},
		},
		"empty queue": {},
	}
	ordering := workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pending := make([]*workload.Info, 0, len(tc.queue))
			for _, w := range tc.queue {
				pending = append(pending, workload.NewInfo(w))
			}
			before := names(pending)
			got := names(TurnOrder(logr.Discard(), pending, ordering))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("TurnOrder (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, names(pending)); diff != "" {
				t.Errorf("TurnOrder changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

func names(infos []*workload.Info) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.Obj.Name)
	}
	return out
}
