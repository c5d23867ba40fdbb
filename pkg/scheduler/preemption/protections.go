package preemption

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/cohorttree"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/metrics"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// queueFacts resolves, once per search and victim queue, what the units that are on resolve
// about cq's workloads against the search's preemptor (policy.Unit.Resolve).
func (p *Preemptor) queueFacts(s *search, cq *schdcache.ClusterQueueSnapshot, scope policy.Scope, units policy.Table) policy.QueueFacts {
	if !units.Resolves() {
		return policy.QueueFacts{}
	}
	if q, ok := s.resolved[cq.Name]; ok {
		return q
	}
	if s.resolved == nil {
		s.resolved = map[kueue.ClusterQueueReference]policy.QueueFacts{}
	}
	if s.preemptorParents == nil {
		s.preemptorParents = cohorttree.Parents(s.cq)
	}
	var q policy.QueueFacts
	units.Resolve(policy.Judging{Sources: p.sources, Log: s.log, Scope: scope, Preemptor: s.cq, Victims: cq, PreemptorParents: s.preemptorParents}, &q)
	s.resolved[cq.Name] = q
	return q
}

// QueueFacts are what the units that are on resolve about cq's workloads against a preemptor of
// cq itself, as a search would: for the admission estimate.
func (p *Preemptor) QueueFacts(log logr.Logger, cq *schdcache.ClusterQueueSnapshot) policy.QueueFacts {
	return p.QueueFactsAgainst(log, cq, cq)
}

// QueueFactsAgainst are what the units that are on resolve about the workloads of victims, cq or
// another ClusterQueue of its cohort, against a preemptor of cq, as a search would: for the
// admission estimate's reclaims.
func (p *Preemptor) QueueFactsAgainst(log logr.Logger, cq, victims *schdcache.ClusterQueueSnapshot) policy.QueueFacts {
	scope := policy.SameClusterQueue
	if victims != cq {
		scope = policy.OtherClusterQueue
	}
	var q policy.QueueFacts
	p.unitsOn().Resolve(policy.Judging{Sources: p.sources, Log: log, Scope: scope, Preemptor: cq, Victims: victims,
		PreemptorParents: cohorttree.Parents(cq)}, &q)
	return q
}

const (
	kindPreempt = "preempt"
	kindReclaim = "reclaim"
	// kindUnit: a protection its feature's unit explains (policy.Unit.Vetoed).
	kindUnit = "unit"
	// kindPromised: a protection that promises the candidate's room to another preemptor
	// (policy.Unit.Promised).
	kindPromised = "promised"
)

// protectedTally counts the candidates a search skipped because of a protection (min-runtime,
// preemption toleration, or a notice for another preemptor).
type protectedTally struct {
	bySource map[string]int
	// byKind counts min-runtime skips by kind, for the metric.
	byKind map[string]int
	// reclaim counts skipped candidates of other ClusterQueues protected by a min-runtime or a
	// toleration.
	reclaim int
	// firstEnd is when the earliest protection that ends at all ends.
	firstEnd time.Time
	// minRuntime lists the min-runtime skips, so that the metric counts each once.
	minRuntime []protectedCandidate
	// unitEnds is, by rule of a unit that explains its protection, when the last of its
	// protections met ends.
	unitEnds map[string]time.Time
}

type protectedCandidate struct {
	uid  types.UID
	kind string
	end  time.Time
}

// add records a skipped candidate; end is zero for a protection that lasts as long as it runs.
func (t *protectedTally) add(s *search, c *policy.Candidate, source, kind string, end time.Time) {
	if t.bySource == nil {
		t.bySource, t.byKind = map[string]int{}, map[string]int{}
	}
	t.bySource[source]++
	if kind == kindPreempt || kind == kindReclaim {
		t.byKind[kind]++
		t.minRuntime = append(t.minRuntime, protectedCandidate{uid: c.Info.Obj.UID, kind: kind, end: end})
	}
	// A promised candidate's room goes to the preemptor it is promised to: no reason to hold
	// quota for this one (Wait's holdQuota).
	if c.Info.ClusterQueue != s.cq.Name && kind != kindPromised {
		t.reclaim++
	}
	if !end.IsZero() && (t.firstEnd.IsZero() || end.Before(t.firstEnd)) {
		t.firstEnd = end
	}
	if logV := s.log.V(4); logV.Enabled() {
		logV.Info("Candidate protected", "preemptor", klog.KObj(s.info.Obj), "candidate", klog.KObj(c.Info.Obj),
			"kind", kind, "source", source, "until", end)
	}
}

// addDecision records a candidate the policy refused with a protection rule, as the unit whose
// rule it is explains it; kind is the search's (preempt or reclaim) for a unit counted on the
// protected-candidates metric.
func (t *protectedTally) addDecision(s *search, in *policy.Input, rule string, kind string) {
	for _, u := range s.judging.units {
		if u.Vetoed == nil {
			continue
		}
		why, until, ok := u.Vetoed(rule, in)
		if !ok {
			continue
		}
		switch {
		case u.Counted:
		case u.Promised:
			kind = kindPromised
		default:
			kind = kindUnit
		}
		t.add(s, in.Candidate, why, kind, until)
		if t.unitEnds == nil {
			t.unitEnds = map[string]time.Time{}
		}
		if until.After(t.unitEnds[rule]) {
			t.unitEnds[rule] = until
		}
		return
	}
}

func (t *protectedTally) total() int {
	n := 0
	for _, v := range t.bySource {
		n += v
	}
	return n
}

// report counts on kueue_preemption_protected_candidates_total the min-runtime skips that log
// has not seen for this preemptor and protection yet.
func (t *protectedTally) report(log *metrics.Decisions, preemptor types.UID, cq kueue.ClusterQueueReference, role string, custom *kueuemetrics.CustomLabels, now time.Time) {
	for _, c := range t.minRuntime {
		if log.First(string(preemptor)+"/"+string(c.uid)+"/"+c.kind+"/"+c.end.String(), now, c.end) {
			metrics.ProtectedCandidates.WithLabelValues(metrics.ClusterQueueLabels(custom, cq, string(cq), c.kind, role)...).Inc()
		}
	}
}

// message says how many candidates are protected, by what, and when the first protection ends.
func (t *protectedTally) message() string {
	n := t.total()
	if n == 0 {
		return ""
	}
	sources := slices.Sorted(maps.Keys(t.bySource))
	parts := make([]string, len(sources))
	for i, src := range sources {
		parts[i] = fmt.Sprintf("%d by %s", t.bySource[src], src)
	}
	noun := "candidates are"
	if n == 1 {
		noun = "candidate is"
	}
	msg := fmt.Sprintf("%d preemption %s protected (%s)", n, noun, strings.Join(parts, ", "))
	if !t.firstEnd.IsZero() {
		msg += "; the first protection ends at " + t.firstEnd.UTC().Format(time.RFC3339)
	}
	return msg
}

// explainsVetoes reports whether a feature that is on explains its own protection.
func (p *Preemptor) explainsVetoes() bool {
	for _, u := range p.units {
		if u.Vetoed != nil && p.on(u.Feature) {
			return true
		}
	}
	return false
}

// protectionSurvey runs the candidate collection of a search for wl over every flavor/resource its
// ClusterQueue has for the resources wl requests, and returns the candidates protections skipped.
func (p *Preemptor) protectionSurvey(ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot) *protectedTally {
	cq := snapshot.ClusterQueue(wl.ClusterQueue)
	if !p.explainsVetoes() || cq == nil {
		return &protectedTally{}
	}
	requested := sets.New[corev1.ResourceName]()
	for _, ps := range wl.TotalRequests {
		for r := range ps.Requests.Iter() {
			requested.Insert(r)
		}
	}
	contested := sets.New[resources.FlavorResource]()
	for fr := range cq.ResourceNode.Quotas {
		if requested.Has(fr.Resource) {
			contested.Insert(fr)
		}
	}
	s := p.newSearch(ctx, wl, snapshot, contested, workload.Usage{})
	if p.enableFairSharing {
		p.fairCandidates(s)
	} else {
		p.classicalCandidates(s)
	}
	return &s.protected
}
