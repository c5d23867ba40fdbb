package preemption

import (
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/cohorttree"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Policy is the victim policy the preemptor decides with: the admission estimate asks it the
// same questions.
func (p *Preemptor) Policy() *policy.Policy { return p.policy }

// NoticeOf is the notice period cq's workloads get before an eviction, by reason, as noticeFor
// resolves it; nil while the feature is off.
func (p *Preemptor) NoticeOf(cq *schdcache.ClusterQueueSnapshot) func(reason string) time.Duration {
	if !p.noticeOn() {
		return nil
	}
	path, def := policy.NoticePath(p.notices().SettingsPath(policy.FeatureNotice, cq.Name, cohorttree.Parents(cq)))
	return func(reason string) time.Duration {
		d, _ := policy.ResolveNotice(path, reason, def)
		return d
	}
}

// TurnTime is a pending workload's turn time (turnTime), for the admission estimate.
func TurnTime(wl *kueue.Workload, ordering workload.Ordering) time.Time {
	return turnTime(wl, ordering)
}
