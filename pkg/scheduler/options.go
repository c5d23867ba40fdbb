package scheduler

import (
	"context"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/util/expectations"
	"sigs.k8s.io/kueue/pkg/util/roletracker"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
)

// Option configures a Scheduler. The names and signatures match upstream's scheduler
// options, so a caller can switch between the two by changing the package only.
type Option func(*options)

// options are the resolved Options.
type options struct {
	podsReadyRequeuingTimestamp configapi.RequeuingTimestamp
	fairSharing                 *configapi.FairSharing
	admissionFairSharing        *configapi.AdmissionFairSharing
	quotaCheckStrategy          configapi.QuotaCheckStrategy
	clock                       clock.Clock
	roleTracker                 *roletracker.RoleTracker
	preemptionExpectations      *expectations.Store
	customLabels                *metrics.CustomLabels
	resourceFormatter           *resources.ResourceFormatter
	newPreemptor                PreemptorFactory
	apiReader                   client.Reader
	wakeQueue                   func(context.Context, kueue.ClusterQueueReference)
	requeueBatchPeriod          time.Duration
	headsPerCycle               int
	pendingStatusWriters        int
	handoverHoldBound           time.Duration
}

var defaultOptions = options{
	podsReadyRequeuingTimestamp: configapi.EvictionTimestamp,
	clock:                       clock.RealClock{},
	newPreemptor:                NewUpstreamPreemptor,
	headsPerCycle:               1,
	handoverHoldBound:           tsconfig.DefaultMaxHandoverHold,
}

// WithHandoverHoldBound sets the longest a victim of a turn or an expected runtime keeps its quota
// while its Pods terminate (HandoverAfterVictimTermination): its Job's grace period, up to d
// (timeshare.maxHandoverHold). Upstream's scheduler has no such option.
func WithHandoverHoldBound(d time.Duration) Option {
	return func(o *options) {
		o.handoverHoldBound = max(d, 0)
	}
}

// WithTimeSource sets the clock of the loop, its preemptor and its wake-ups: the manager's
// injected clock, or the simulator's. Upstream has it only for tests (WithClock).
func WithTimeSource(c clock.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithQueueWaker gives the loop a way to retry a ClusterQueue's inadmissible workloads at a time
// it chooses (after a drain hold or a refused preemption), and the queue manager's batch period,
// which such a retry waits for. Without it, the loop wakes the ClusterQueue through the queue
// manager New is given (an update of the ClusterQueue, as the manager's waker does).
func WithQueueWaker(wake func(context.Context, kueue.ClusterQueueReference), requeueBatchPeriod time.Duration) Option {
	return func(o *options) {
		o.wakeQueue = wake
		o.requeueBatchPeriod = requeueBatchPeriod
	}
}

// WithAPIReader gives the scheduler a reader that goes to the API server, not to the informer
// cache. After a quota reservation's write fails in a way that does not say whether it happened
// (a timeout, a 5xx, no answer), the scheduler reads the workload back with it: a reservation that
// was written is then kept, instead of being written a second time with a new start. Upstream's
// scheduler has no such option.
func WithAPIReader(r client.Reader) Option {
	return func(o *options) {
		o.apiReader = r
	}
}

// WithPreemptor chooses the preemptor. The factory is called once, from New, with the
// resolved options. nil keeps the default, NewUpstreamPreemptor.
func WithPreemptor(factory PreemptorFactory) Option {
	return func(o *options) {
		if factory != nil {
			o.newPreemptor = factory
		}
	}
}

// WithHeadsPerCycle sets how many workloads of one ClusterQueue a cycle may take: after its head
// is admitted, a ClusterQueue gives its next workload, on the snapshot as the cycle's admissions
// left it, up to n in all. 1 (the default, and what values below 1 give) is upstream's loop, one
// head per ClusterQueue per cycle. Upstream's scheduler has no such option.
func WithHeadsPerCycle(n int) Option {
	return func(o *options) {
		o.headsPerCycle = max(n, 1)
	}
}

// maxPendingStatusWriters bounds WithPendingStatusWriters: the writers share the loop's client,
// and its rate limit, with the admissions.
const maxPendingStatusWriters = 64

// WithPendingStatusWriters sets how many workers write the pending status of heads that wait,
// off the cycle's path. 0 (the default) writes it inline, as upstream's loop. Upstream's scheduler
// has no such option.
func WithPendingStatusWriters(n int) Option {
	return func(o *options) {
		o.pendingStatusWriters = min(max(n, 0), maxPendingStatusWriters)
	}
}
