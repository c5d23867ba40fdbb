package estimate

import (
	"cmp"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate/quotatree"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Config is what the manager knows of a ClusterQueue besides its snapshot: the preemptor's policy
// and the settings it resolves for the queue.
type Config struct {
	Log    logr.Logger
	Policy *policy.Policy
	// StrictFIFO: the ClusterQueue's spec.queueingStrategy is StrictFIFO.
	StrictFIFO bool
	// Resolved is what the units resolve about the ClusterQueue's workloads against a preemptor
	// of the queue itself (policy.Unit.Resolve: its preemptMinRuntime).
	Resolved policy.QueueFacts
	// Wake says which units are on and the lengths of protections configured (policy.Changes).
	Wake policy.WakeSettings
	// Sources are the manager's sources of the units' facts.
	Sources  policy.Sources
	Ordering workload.Ordering
	Clock    policy.RuntimeClock
	// TurnTime is a pending workload's turn time, nil where the ClusterQueue takes no turns (the
	// queue-order timestamp then).
	TurnTime func(*kueue.Workload) time.Time
	// Notice is how long a victim keeps running before its eviction, by reason; nil: the units
	// of Wake say (policy.Table.EvictionDelay), from Sources.
	Notice   func(reason string) time.Duration
	Handover time.Duration
	// DrainOf is how long a workload's quota stays held after an eviction for one of this
	// project's reasons (Holder.Drain); nil: none.
	DrainOf func(*kueue.Workload) time.Duration
	// Against is what the units resolve about the workloads of victims, another ClusterQueue of
	// the cohort, against a preemptor of this one (its reclaimMinRuntime), for FromCohort; nil:
	// nothing.
	Against func(victims *schdcache.ClusterQueueSnapshot) policy.QueueFacts
	// Preemptor is the ClusterQueue's active preemptor (Queue.Preemptor); zero: none.
	Preemptor policy.ActivePreemptor
}

// FromCohort reads a walk of the cohort tree cq belongs to (ComputeCohort): a copy of its quotas
// and usage, and each of its ClusterQueues, by name, with its pending workloads in turn order
// (pending) and the Config the manager has for it (config). A ClusterQueue without a Cohort is a
// walk of itself alone.
func FromCohort(snap *schdcache.Snapshot, cq *schdcache.ClusterQueueSnapshot, pending func(kueue.ClusterQueueReference) []*workload.Info,
	config func(*schdcache.ClusterQueueSnapshot) Config) (*quotatree.Tree, []Member) {
	tree := quotatree.FromSnapshot(cq)
	names := tree.ClusterQueues()
	members := make([]Member, 0, len(names))
	for _, name := range names {
		m := snap.ClusterQueue(name)
		if m == nil {
			continue
		}
		c := config(m)
		q, holders, waiting := FromSnapshot(m, pending(name), c)
		q.Reclaim = m.Preemption.ReclaimWithinCohort
		q.BorrowWithinCohort = m.Preemption.BorrowWithinCohort != nil && m.Preemption.BorrowWithinCohort.Policy != kueue.BorrowWithinCohortPolicyNever
		if c.Against != nil && q.Reclaim != kueue.PreemptionPolicyNever && q.Reclaim != "" {
			q.Against = map[kueue.ClusterQueueReference]*policy.QueueFacts{}
			for _, other := range names {
				if v := snap.ClusterQueue(other); other != name && v != nil {
					facts := c.Against(v)
					q.Against[other] = &facts
				}
			}
		}
		members = append(members, Member{Queue: q, Holders: holders, Pending: waiting})
	}
	return tree, members
}

// FromSnapshot reads the walk's input off cq, a ClusterQueue of a scheduler snapshot, and its
// pending workloads in turn order (the visibility API's order).
func FromSnapshot(cq *schdcache.ClusterQueueSnapshot, pending []*workload.Info, c Config) (*Queue, []Holder, []Waiting) {
	if c.Wake.Units == nil {
		c.Wake.Units = plugins.Units()
	}
	q := &Queue{
		Name: cq.Name, Capacity: map[resources.FlavorResource]int64{}, Policy: c.Policy,
		Within: cq.Preemption.WithinClusterQueue, StrictFIFO: c.StrictFIFO, Resolved: c.Resolved,
		Wake: c.Wake, Notice: c.Notice, Handover: c.Handover, Preemptor: c.Preemptor,
	}
	for _, rg := range cq.ResourceGroups {
		g := Group{Resources: sortedResources(rg.CoveredResources.UnsortedList()), Flavors: rg.Flavors}
		q.Groups = append(q.Groups, g)
		for _, f := range g.Flavors {
			for _, r := range g.Resources {
				fr := resources.FlavorResource{Flavor: f, Resource: r}
				q.Capacity[fr] = cq.Available(fr).Int64()
			}
		}
	}
	units := slices.DeleteFunc(slices.Clone(c.Wake.Units), func(u policy.Unit) bool {
		return c.Wake.Enabled != nil && !c.Wake.Enabled(u.Feature)
	})
	if q.Notice == nil {
		q.Notice = units.EvictionDelay(c.Sources, cq)
	}
	holders := make([]Holder, 0, len(cq.Workloads))
	for _, info := range cq.Workloads {
		h := Holder{Name: klog.KObj(info.Obj).String(), Usage: map[resources.FlavorResource]int64{}}
		for fr, v := range info.FlavorResourceUsage() {
			h.Usage[fr] = v.Int64()
			if _, ok := q.Capacity[fr]; ok {
				q.Capacity[fr] += v.Int64()
			}
		}
		h.Candidate = policy.NewCandidate(c.Log, info, c.Ordering)
		h.Candidate.CountRuntimeFrom(c.Clock)
		c.Wake.ReadFacts(&h.Candidate, info.Obj, c.Sources)
		h.Runtime, _ = units.PromisedRuntime(info.Obj)
		h.ReadySince = policy.RunningSince(info.Obj, policy.RuntimeClockPodsReady)
		h.Drain = c.drainOf(info.Obj)
		holders = append(holders, h)
	}
	// The snapshot's map has no order; the walk's ties follow the holders' order.
	slices.SortFunc(holders, func(a, b Holder) int { return cmp.Compare(a.Name, b.Name) })
	waiting := make([]Waiting, 0, len(pending))
	for _, info := range pending {
		wt := Waiting{Name: klog.KObj(info.Obj).String(), Requests: map[corev1.ResourceName]int64{}}
		for _, ps := range info.TotalRequests {
			if ps.Requests != nil {
				for r, v := range ps.Requests.Iter() {
					wt.Requests[r] += v
				}
			}
		}
		wt.Pending = policy.NewPending(c.Log, info, c.Ordering)
		if c.TurnTime != nil {
			wt.Pending.QueuedAt = c.TurnTime(info.Obj)
		}
		wt.Candidate = policy.NewCandidate(c.Log, info, c.Ordering)
		c.Wake.ReadFacts(&wt.Candidate, info.Obj, c.Sources)
		wt.Runtime, _ = units.PromisedRuntime(info.Obj)
		wt.Drain = c.drainOf(info.Obj)
		if rs := info.Obj.Status.RequeueState; rs != nil && rs.RequeueAt != nil {
			wt.NotBefore = rs.RequeueAt.Time
		}
		waiting = append(waiting, wt)
	}
	return q, holders, waiting
}

func (c *Config) drainOf(wl *kueue.Workload) time.Duration {
	if c.DrainOf == nil {
		return 0
	}
	return c.DrainOf(wl)
}

func sortedResources(rs []corev1.ResourceName) []corev1.ResourceName {
	slices.Sort(rs)
	return rs
}
