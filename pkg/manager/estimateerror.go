package manager

import (
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
	tsmetrics "github.com/kueue-timeshare/kueue-timeshare/pkg/metrics"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
)

// firstEstimates keeps, by UID, the first estimate each pending workload was given in its
// current wait, and observes its error when the workload's quota is reserved. It keeps nothing
// unless started (on the replica that schedules): a follower's reads would count twice.
type firstEstimates struct {
	role         func() string
	customLabels *kueuemetrics.CustomLabels

	mu    sync.Mutex
	on    bool
	byUID map[types.UID]firstEstimate
}

type firstEstimate struct {
	// since is the start of the wait it was made in (queuesettings.WaitingSince).
	since time.Time
	when  time.Time
	// unknown: the walk gave no time.
	unknown bool
}

func (f *firstEstimates) start() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on, f.byUID = true, map[types.UID]firstEstimate{}
}

func (f *firstEstimates) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on, f.byUID = false, nil
}

// offer keeps the estimates of the pending workloads infos that have none in their current wait.
// An estimate kept from an earlier wait (computed from a list read before an admission the
// informer had already delivered) is replaced.
func (f *firstEstimates) offer(infos []*workload.Info, byName map[string]estimate.Estimate) {
	if f == nil || len(byName) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return
	}
	for _, info := range infos {
		est, ok := byName[info.Obj.Namespace+"/"+info.Obj.Name]
		if !ok {
			continue
		}
		since := queuesettings.WaitingSince(info.Obj)
		if kept, ok := f.byUID[info.Obj.UID]; ok && kept.since.Equal(since) {
			continue
		}
		f.byUID[info.Obj.UID] = firstEstimate{since: since, when: est.When, unknown: est.Unknown}
	}
}

// observe takes a Workload's update: at its quota reservation it reports how far the admission
// was from its first estimate of that wait; a workload that finished or was deactivated has its
// estimate forgotten.
func (f *firstEstimates) observe(old, wl *kueue.Workload) {
	if !ptr.Deref(wl.Spec.Active, true) || apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		f.forget(wl.UID)
		return
	}
	if workload.HasQuotaReservation(old) || !workload.HasQuotaReservation(wl) || wl.Status.Admission == nil {
		return
	}
	f.mu.Lock()
	if !f.on {
		f.mu.Unlock()
		return
	}
	kept, ok := f.byUID[wl.UID]
	delete(f.byUID, wl.UID)
	f.mu.Unlock()
	// An estimate of an earlier wait says nothing about this one.
	ok = ok && kept.since.Equal(queuesettings.WaitingSince(old))
	cq := wl.Status.Admission.ClusterQueue
	role := f.role()
	switch {
	case !ok:
		tsmetrics.AdmissionsWithoutEstimate.WithLabelValues(tsmetrics.ClusterQueueLabels(f.customLabels, cq, string(cq), tsmetrics.EstimateNone, role)...).Inc()
	case kept.unknown:
		tsmetrics.AdmissionsWithoutEstimate.WithLabelValues(tsmetrics.ClusterQueueLabels(f.customLabels, cq, string(cq), tsmetrics.EstimateUnknown, role)...).Inc()
	default:
		d, direction := admittedAt(wl).Sub(kept.when), tsmetrics.EstimateLate
		if d < 0 {
			d, direction = -d, tsmetrics.EstimateEarly
		}
		tsmetrics.EstimateError.WithLabelValues(tsmetrics.ClusterQueueLabels(f.customLabels, cq, string(cq), direction, role)...).Observe(d.Seconds())
	}
}

// admittedAt is when wl's quota was reserved, to the second as the API keeps it.
func admittedAt(wl *kueue.Workload) time.Time {
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

func (f *firstEstimates) forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byUID, uid)
}

// size is how many first estimates are kept.
func (f *firstEstimates) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byUID)
}

// handler feeds observe and forget from the Workload informer.
func (f *firstEstimates) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, obj any) {
			old, ok1 := oldObj.(*kueue.Workload)
			wl, ok2 := obj.(*kueue.Workload)
			if ok1 && ok2 {
				f.observe(old, wl)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if wl, ok := obj.(*kueue.Workload); ok {
				f.forget(wl.UID)
			}
		},
	}
}
