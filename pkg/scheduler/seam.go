package scheduler

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	preemptioncommon "sigs.k8s.io/kueue/pkg/scheduler/preemption/common"
	"sigs.k8s.io/kueue/pkg/util/expectations"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
)

// Preemptor is what the admission loop needs from a preemptor.
type Preemptor interface {
	// GetTargets returns the workloads to evict so that wl fits with the given assignment,
	// or nothing when no set of victims allowed by policy makes room.
	GetTargets(ctx context.Context, wl workload.Info, assignment flavorassigner.Assignment, snapshot *schdcache.Snapshot) []*preemption.Target
	// IssuePreemptions evicts the targets on behalf of preemptor.
	IssuePreemptions(ctx context.Context, cache *schdcache.Cache, preemptor *workload.Info, targets []*preemption.Target, snap *schdcache.ClusterQueueSnapshot) (preempted, failed int, err error)
	// SatisfyPreemptionExpectation is called once wl's admission is written, so that the
	// preemptor stops waiting on evictions made for it.
	SatisfyPreemptionExpectation(log logr.Logger, wl *kueue.Workload)
	// Oracle returns what flavorassigner.New takes to simulate preemption on a snapshot.
	Oracle(snapshot *schdcache.Snapshot) PreemptionOracle
	// Hooks returns the preemptor's extension points of the admission loop; the loop asks once,
	// when it is built.
	Hooks() Hooks
}

// PreemptionOracle tells the flavor assigner whether preempting or reclaiming could make
// room for quantity of fr, and at which borrowing height the workload would then fit.
type PreemptionOracle interface {
	SimulatePreemption(ctx context.Context, cq *schdcache.ClusterQueueSnapshot, wl workload.Info, fr resources.FlavorResource, quantity resources.Amount) (preemptioncommon.PreemptionPossibility, int)
}

// PreemptorConfig carries what a preemptor needs from the scheduler's options.
type PreemptorConfig struct {
	Client               client.Client
	Ordering             workload.Ordering
	Recorder             events.EventRecorder
	FairSharing          *configapi.FairSharing
	AdmissionFairSharing bool
	Clock                clock.Clock
	RoleTracker          *roletracker.RoleTracker
	Expectations         *expectations.Store
	CustomLabels         *metrics.CustomLabels
}

// PreemptorFactory builds the preemptor once the scheduler's options are resolved.
type PreemptorFactory func(PreemptorConfig) Preemptor

// NewUpstreamPreemptor wraps upstream's preemptor; it is the default, so that with none of
// our features configured victims are chosen exactly as upstream chooses them.
func NewUpstreamPreemptor(c PreemptorConfig) Preemptor {
	return &upstreamPreemptor{Preemptor: preemption.New(
		c.Client, c.Ordering, c.Recorder, c.FairSharing, c.AdmissionFairSharing,
		c.Clock, c.RoleTracker, c.Expectations, c.CustomLabels,
	)}
}

// upstreamPreemptor adds the Oracle and Hooks methods; everything else is upstream's.
type upstreamPreemptor struct {
	*preemption.Preemptor
}

func (u *upstreamPreemptor) Oracle(snapshot *schdcache.Snapshot) PreemptionOracle {
	return preemption.NewOracle(u.Preemptor, snapshot)
}

// Hooks: none, upstream's behaviour.
func (u *upstreamPreemptor) Hooks() Hooks { return Hooks{} }

var _ Preemptor = (*upstreamPreemptor)(nil)

// explainWait asks the preemptor's verdict on a head that found no victims: its note joins the
// entry's message, and whether to hold quota is kept for reserveCapacityForUnreclaimablePreempt.
func (s *Scheduler) explainWait(ctx context.Context, e *entry, snap *schdcache.Snapshot) {
	if s.hooks.Wait == nil {
		return
	}
	v := s.hooks.Wait(ctx, &e.Info, snap)
	e.holdQuota = v.HoldQuota
	// The note may quote annotations (a notice's preemptor): bounded before it joins the
	// condition message and the event, which the workload's owner reads: other namespaces'
	// workloads are not named there.
	if v.Note != "" {
		e.inadmissibleMsg += "; " + message.Bound(message.ForNamespace(v.Note, e.Obj.Namespace))
	}
}

func (s *Scheduler) admissionVeto(ctx context.Context, e *entry, snap *schdcache.Snapshot) string {
	if s.hooks.VetoAdmission == nil {
		return ""
	}
	return s.hooks.VetoAdmission(ctx, &e.Info, snap)
}
