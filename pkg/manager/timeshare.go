package manager

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/firstready"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/expectedruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/requeue"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption"
)

// timesharePreemptor adapts our preemptor to the scheduler's interface.
type timesharePreemptor struct {
	*preemption.Preemptor
}

func (p timesharePreemptor) Oracle(s *schdcache.Snapshot) scheduler.PreemptionOracle {
	return p.Preemptor.Oracle(s)
}

func (p timesharePreemptor) wait(ctx context.Context, wl *workload.Info, s *schdcache.Snapshot) scheduler.WaitVerdict {
	note, hold := p.Preemptor.Wait(ctx, wl, s)
	return scheduler.WaitVerdict{Note: note, HoldQuota: hold}
}

// Hooks are the admission loop's extension points our preemptor fills in.
func (p timesharePreemptor) Hooks() scheduler.Hooks {
	return scheduler.Hooks{
		SubstituteHead:           p.SubstituteHead,
		VetoAdmission:            p.VetoAdmission,
		Wait:                     p.wait,
		RefusalsDependOnWorkload: p.RefusalsDependOnWorkload,
		CannotUseTurn:            p.CannotUseTurn,
	}
}

// PreemptorFactory builds our preemptor with the per-ClusterQueue settings of store, the units'
// cluster sources (policy.Table.NewSources), the pending workloads of queues (to decide whose turn
// it is) and the default expected-runtime cooldown, plus extra options. The manager passes it to
// scheduler.WithPreemptor; the simulator does the same, so both choose victims with the same code.
func PreemptorFactory(store *queuesettings.Store, sources policy.Sources, queues *qcache.Manager, requeueDelay time.Duration, extra ...preemption.Option) scheduler.PreemptorFactory {
	return func(c scheduler.PreemptorConfig) scheduler.Preemptor {
		opts := []preemption.Option{
			preemption.WithPendingWorkloads(queues.PendingWorkloadsInfo),
			preemption.WithSettingsKnown(store.Known),
			preemption.WithCohortSettingsKnown(store.CohortKnown),
			// The one registration of the victim policy's features: each takes the source it reads.
			preemption.WithSources(append(policy.Sources{store, expectedruntime.DefaultCooldown(requeueDelay)}, sources...)...),
		}
		opts = append(opts, extra...)
		return timesharePreemptor{preemption.New(c.Client, c.Ordering, c.Recorder, c.FairSharing, c.AdmissionFairSharing,
			c.Clock, c.RoleTracker, c.Expectations, c.CustomLabels, opts...)}
	}
}

// setupTimeshare adds the parts behind our per-ClusterQueue features: the settings store and its
// controller, the controller that requeues workloads evicted for our preemption reasons, and the
// waker that re-evaluates a queue when a window runs out.
func (m *Manager) setupTimeshare() error {
	log := m.log.WithName("timeshare")
	ts := m.timeshareCfg
	m.settings = NewSettingsStore(&ts)
	wake := func(ctx context.Context, cq kueue.ClusterQueueReference) {
		queuesettings.Wake(ctx, m.GetClient(), m.Queues, cq, log)
	}
	if err := queuesettings.Setup(m, m.settings, wake); err != nil {
		return fmt.Errorf("setting up the ClusterQueue settings controller: %w", err)
	}
	// A Cohort's settings reach every ClusterQueue below it; waking one ClusterQueue wakes its
	// whole tree, and Cohort changes are rare, so wake them all.
	wakeAll := func(ctx context.Context, _ kueue.CohortReference) {
		var cqs kueue.ClusterQueueList
		if err := m.GetClient().List(ctx, &cqs); err != nil {
			log.V(2).Info("Could not list ClusterQueues to wake", "error", err.Error())
			return
		}
		for i := range cqs.Items {
			queuesettings.Wake(ctx, m.GetClient(), m.Queues, kueue.ClusterQueueReference(cqs.Items[i].Name), log)
		}
	}
	m.settings.SetCohortExists(queuesettings.CohortInCache(m.GetCache()))
	if err := queuesettings.SetupCohorts(m, m.settings, wakeAll); err != nil {
		return fmt.Errorf("setting up the Cohort settings controller: %w", err)
	}
	m.sources = plugins.Units().NewSources(m.GetClient())
	m.workloadIndex = preemption.NewWorkloadIndex()
	if err := policy.SetupSources(m, m.sources); err != nil {
		return fmt.Errorf("setting up the controllers of the units' sources: %w", err)
	}
	if err := requeue.Setup(m, m.opts.Clock); err != nil {
		return fmt.Errorf("setting up the requeue controller: %w", err)
	}
	env := policy.Env{Clock: m.opts.Clock, Wake: wake, CustomLabels: m.customLabels, RoleTracker: m.roleTracker}
	if err := plugins.Units().SetupControllers(m, env); err != nil {
		return err
	}
	if policy.RuntimeClock(m.timeshareCfg.RuntimeClock) == policy.RuntimeClockPodsReady {
		if err := firstready.Setup(m); err != nil {
			return fmt.Errorf("setting up the first-ready controller: %w", err)
		}
	}
	var tick clock.WithTicker = clock.RealClock{}
	if c, ok := m.opts.Clock.(clock.WithTicker); ok {
		tick = c
	}
	w := &queuesettings.Waker{Clock: tick, Client: m.GetClient(), Queues: m.Queues, Store: m.settings, Sources: m.sources, Log: log,
		RuntimeClock: policy.RuntimeClock(m.timeshareCfg.RuntimeClock), RoleTracker: m.roleTracker,
		CustomLabels: m.customLabels, Lead: queuesettings.RequeueBatchPeriod() - queuesettings.LeadMargin,
		Waits: &queuesettings.WaitGauges{LongWaitThreshold: m.timeshareCfg.Metrics.LongWaitThreshold.Duration, LocalQueueMetrics: m.lqMetrics}}
	if err := m.Add(w); err != nil {
		return fmt.Errorf("adding the window waker: %w", err)
	}
	return nil
}
