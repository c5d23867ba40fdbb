package manager

import (
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption/policy"
)

// timesharePreemptor adapts our preemptor to the scheduler's interface.
type timesharePreemptor struct {
	*preemption.Preemptor
}

func (p timesharePreemptor) Oracle(s *schdcache.Snapshot) scheduler.PreemptionOracle {
	return p.Preemptor.Oracle(s)
}

// timesharePreemptorFactory builds our preemptor with the per-ClusterQueue settings of store.
func timesharePreemptorFactory(store *queuesettings.Store) scheduler.PreemptorFactory {
	return func(c scheduler.PreemptorConfig) scheduler.Preemptor {
		return timesharePreemptor{preemption.New(c.Client, c.Ordering, c.Recorder, c.FairSharing, c.AdmissionFairSharing,
			c.Clock, c.RoleTracker, c.Expectations, c.CustomLabels,
			preemption.WithQueueSettings(func(cq kueue.ClusterQueueReference) policy.QueueSettings { return store.Settings(cq) }),
		)}
	}
}
