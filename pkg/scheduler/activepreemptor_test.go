package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

func TestActivePreemptorIsTheLastRequeuedForItsPreemptions(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	type requeue struct {
		name   string
		cq     kueue.ClusterQueueReference
		reason qcache.RequeueReason
	}
	cases := map[string]struct {
		requeues []requeue
		want     map[kueue.ClusterQueueReference]ActivePreemptor
	}{
		"a workload requeued waiting for its preemptions is kept": {
			requeues: []requeue{{"a", "cq", qcache.RequeueReasonPendingPreemption}},
			want:     map[kueue.ClusterQueueReference]ActivePreemptor{"cq": {UID: "uid-a", Generation: 2, At: t0}},
		},
		"so is one waiting for a migration": {
			requeues: []requeue{{"a", "cq", qcache.RequeueReasonPendingMigration}},
			want:     map[kueue.ClusterQueueReference]ActivePreemptor{"cq": {UID: "uid-a", Generation: 2, At: t0}},
		},
		"one requeued for any other reason is not": {
			requeues: []requeue{
				{"a", "cq", qcache.RequeueReasonNoFit},
				{"b", "cq", qcache.RequeueReasonPreemptionNoCandidates},
				{"c", "cq", qcache.RequeueReasonFailedAfterNomination},
				{"d", "cq", qcache.RequeueReasonGeneric},
			},
			want: map[kueue.ClusterQueueReference]ActivePreemptor{},
		},
		"the last to preempt replaces the one before, in its own ClusterQueue only": {
			requeues: []requeue{
				{"a", "cq", qcache.RequeueReasonPendingPreemption},
				{"b", "other", qcache.RequeueReasonPendingPreemption},
				{"c", "cq", qcache.RequeueReasonPendingPreemption},
				{"d", "cq", qcache.RequeueReasonNoFit},
			},
			want: map[kueue.ClusterQueueReference]ActivePreemptor{
				"cq":    {UID: "uid-c", Generation: 2, At: t0},
				"other": {UID: "uid-b", Generation: 2, At: t0},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &Scheduler{}
			for _, r := range tc.requeues {
				info := workload.NewInfo(utiltestingapi.MakeWorkload(r.name, "ns").UID(types.UID("uid-" + r.name)).Generation(2).Obj())
				info.LastEvaluatedGeneration = 2
				s.preemptors.requeued(r.cq, info, r.reason, t0)
			}
			got := map[kueue.ClusterQueueReference]ActivePreemptor{}
			for _, cq := range []kueue.ClusterQueueReference{"cq", "other"} {
				if a, ok := s.ActivePreemptor(cq); ok {
					got[cq] = a
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("active preemptors (-want +got):\n%s", diff)
			}
		})
	}
}
