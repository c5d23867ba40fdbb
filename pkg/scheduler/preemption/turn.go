package preemption

import (
	"cmp"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption/policy"
)

// turnTime is when a pending workload started waiting for its turn: when it was last preempted
// for time-sharing, or else its queue-order timestamp. The queue itself orders by creation, which
// would hand the quota straight back to the workload just preempted.
func turnTime(wl *kueue.Workload, ordering workload.Ordering) time.Time {
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == policy.TimeBasedReason {
		return c.LastTransitionTime.Time
	}
	return ordering.GetQueueOrderTimestamp(wl).Time
}

// waitingLonger returns a same-priority pending workload of the preemptor's queue whose turn comes
// before the preemptor's, or "" when the preemptor has the turn. Ties go to the smaller UID, as in
// the queue.
func (p *Preemptor) waitingLonger(s *search) string {
	if p.pending == nil || s.settings.MinAdmitDuration <= 0 {
		return ""
	}
	mine := turnTime(s.info.Obj, p.ordering)
	for _, other := range p.pending(s.cq.Name) {
		if other.Obj.UID == s.info.Obj.UID || priority.EffectivePriority(s.log, other.Obj) != s.preemptor.Priority {
			continue
		}
		theirs := turnTime(other.Obj, p.ordering)
		if c := theirs.Compare(mine); c < 0 || (c == 0 && cmp.Compare(string(other.Obj.UID), string(s.info.Obj.UID)) < 0) {
			return klog.KObj(other.Obj).String()
		}
	}
	return ""
}

// RefusalsDependOnWorkload reports whether, in cq, two pending workloads of the same shape can get
// different answers: they can when turns are taken there.
func (p *Preemptor) RefusalsDependOnWorkload(cq kueue.ClusterQueueReference) bool {
	return p.pending != nil && p.settings(cq).MinAdmitDuration > 0
}
