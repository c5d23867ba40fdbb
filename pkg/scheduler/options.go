package scheduler

import (
	"context"
	"testing"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/util/expectations"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
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
}

var defaultOptions = options{
	podsReadyRequeuingTimestamp: configapi.EvictionTimestamp,
	clock:                       clock.RealClock{},
	newPreemptor:                NewUpstreamPreemptor,
	wakeQueue:                   func(context.Context, kueue.ClusterQueueReference) {},
}

// WithPodsReadyRequeuingTimestamp picks the timestamp that orders workloads requeued after
// a PodsReady timeout.
// Upstream's original: WithPodsReadyRequeuingTimestamp in sigs.k8s.io/kueue/pkg/scheduler.
func WithPodsReadyRequeuingTimestamp(ts configapi.RequeuingTimestamp) Option {
	return func(o *options) {
		o.podsReadyRequeuingTimestamp = ts
	}
}

// WithFairSharing turns fair sharing on; nil leaves the previous value in place.
// Upstream's original: WithFairSharing in sigs.k8s.io/kueue/pkg/scheduler.
func WithFairSharing(fs *configapi.FairSharing) Option {
	return func(o *options) {
		if fs != nil {
			o.fairSharing = fs
		}
	}
}

// WithAdmissionFairSharing sets the admission fair sharing configuration.
// Upstream's original: WithAdmissionFairSharing in sigs.k8s.io/kueue/pkg/scheduler.
func WithAdmissionFairSharing(afs *configapi.AdmissionFairSharing) Option {
	return func(o *options) {
		o.admissionFairSharing = afs
	}
}

// WithClock replaces the clock; the testing.TB argument keeps it out of production wiring.
// Upstream's original: WithClock in sigs.k8s.io/kueue/pkg/scheduler.
func WithClock(_ testing.TB, c clock.Clock) Option {
	return func(o *options) {
		o.clock = c
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
// which such a retry waits for. Without it, a parked workload waits for the next cluster event.
func WithQueueWaker(wake func(context.Context, kueue.ClusterQueueReference), requeueBatchPeriod time.Duration) Option {
	return func(o *options) {
		o.wakeQueue = wake
		o.requeueBatchPeriod = requeueBatchPeriod
	}
}

// WithRoleTracker sets the tracker whose role is added to logs and metrics.
// Upstream's original: WithRoleTracker in sigs.k8s.io/kueue/pkg/scheduler.
func WithRoleTracker(tracker *roletracker.RoleTracker) Option {
	return func(o *options) {
		o.roleTracker = tracker
	}
}

// WithPreemptionExpectations sets the store of in-flight preemptions.
// Upstream's original: WithPreemptionExpectations in sigs.k8s.io/kueue/pkg/scheduler.
func WithPreemptionExpectations(store *expectations.Store) Option {
	return func(o *options) {
		o.preemptionExpectations = store
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

// WithCustomLabels sets the custom metric labels.
// Upstream's original: WithCustomLabels in sigs.k8s.io/kueue/pkg/scheduler.
func WithCustomLabels(cl *metrics.CustomLabels) Option {
	return func(o *options) {
		o.customLabels = cl
	}
}

// WithQuotaCheckStrategy sets how requests for resources a ClusterQueue does not declare
// are treated.
// Upstream's original: WithQuotaCheckStrategy in sigs.k8s.io/kueue/pkg/scheduler.
func WithQuotaCheckStrategy(qcs configapi.QuotaCheckStrategy) Option {
	return func(o *options) {
		o.quotaCheckStrategy = qcs
	}
}

// WithResourceFormatter sets the formatter for quantities in messages.
// Upstream's original: WithResourceFormatter in sigs.k8s.io/kueue/pkg/scheduler.
func WithResourceFormatter(formatter *resources.ResourceFormatter) Option {
	return func(o *options) {
		o.resourceFormatter = formatter
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
