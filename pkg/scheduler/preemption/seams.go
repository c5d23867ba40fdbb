package preemption

import (
	"slices"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	preemptioncommon "sigs.k8s.io/kueue/pkg/scheduler/preemption/common"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption/classical"
)

// The victim policy enters the mirrors of upstream's search here: a search is the classical
// candidate iterator's Judge, and the fair-sharing search's.
var _ classical.Judge = (*search)(nil)

// judging is what judging one ClusterQueue's workloads needs, resolved once per queue.
type judging struct {
	cq *schdcache.ClusterQueueSnapshot
	// skip: the queue's settings are not read yet, so none of its workloads is a candidate.
	skip  bool
	scope policy.Scope
	kind  string
	// queue is what the units resolved about cq (policy.Unit.Resolve).
	queue policy.QueueFacts
	units policy.Table
	// chunk holds the queue's eligible candidates, allocated at the first one with room for
	// all, so that a queue without candidates costs nothing and pointers into it stay valid.
	chunk []candidate
}

// Queue readies the judging of cq's workloads; see classical.Judge.
func (s *search) Queue(cq *schdcache.ClusterQueueSnapshot) bool {
	p := s.p
	if p.unread(cq, cq.Name) != "" {
		s.judging = judging{cq: cq, skip: true}
		return false
	}
	scope, kind := policy.SameClusterQueue, kindPreempt
	if cq != s.cq {
		scope, kind = policy.OtherClusterQueue, kindReclaim
	}
	units := p.unitsOn()
	s.judging = judging{cq: cq, scope: scope, kind: kind, queue: p.queueFacts(s, cq, scope, units), units: units}
	return true
}

// queue is Queue for the fair-sharing search, which asks whatever the answer.
func (s *search) queue(cq *schdcache.ClusterQueueSnapshot) *search {
	s.Queue(cq)
	return s
}

// Eligible asks the victim policy about info, of the queue last readied; see classical.Judge.
func (s *search) Eligible(info *workload.Info, pol kueue.PreemptionPolicy) (*policy.Candidate, string, bool) {
	c := s.eligible(info, pol)
	if c == nil {
		return nil, "", false
	}
	return &c.Candidate, c.reason, true
}

// eligible judges info in the search's scratch candidate, so that refused ones cost no
// allocation, and returns the kept copy of an eligible one. Only workloads that hold contested
// quota are judged (and counted as protected or nominated).
func (s *search) eligible(info *workload.Info, pol kueue.PreemptionPolicy) *candidate {
	j := &s.judging
	if j.skip || !classical.WorkloadUsesResources(info, s.frsNeedPreemption) {
		return nil
	}
	p := s.p
	c := &s.scratch
	*c = candidate{Candidate: policy.NewCandidate(s.log, info, p.workloadOrdering)}
	c.CountRuntimeFrom(p.runtimeClock)
	j.units.ReadFacts(&c.Candidate, info.Obj, p.sources, nil, j.cq != s.cq)
	d := p.decide(s, &c.Candidate, j.scope, pol, &j.queue)
	s.judged(&c.Candidate, d)
	if !d.Eligible {
		s.protected.addDecision(s, &s.question, d.Rule, j.kind)
		return nil
	}
	c.reason = d.Reason
	if j.chunk == nil {
		j.chunk = make([]candidate, 0, len(j.cq.Workloads))
	}
	j.chunk = append(j.chunk, *c)
	return &j.chunk[len(j.chunk)-1]
}

// Compare orders candidates by the victim policy; see classical.Judge.
func (s *search) Compare(a, b *policy.Candidate) int {
	if s.order == nil {
		s.own = s.p.queueFacts(s, s.cq, policy.SameClusterQueue, s.p.unitsOn())
		s.order = &policy.OrderContext{ClusterQueue: s.cq.Name, Queue: &s.own, Now: s.now}
	}
	return s.p.policy.Compare(s.order, a, b)
}

// fairCandidate judges info for the fair-sharing search, which keeps the eligible ones in the
// order findCandidates returns them.
func (s *search) fairCandidate(info *workload.Info, pol kueue.PreemptionPolicy) bool {
	c := s.eligible(info, pol)
	if c == nil {
		return false
	}
	s.fair = append(s.fair, c)
	return true
}

// sortCandidates orders the fair-sharing candidates, the workloads of s.fair, by the victim policy.
func (s *search) sortCandidates(candidates []*workload.Info) []*workload.Info {
	slices.SortFunc(s.fair, func(a, b *candidate) int { return s.Compare(&a.Candidate, &b.Candidate) })
	candidates = candidates[:0]
	for _, c := range s.fair {
		candidates = append(candidates, c.Info)
		// Reasons other than the strategy's own are rare: keep a map only when the policy gave one.
		if c.reason != "" {
			if s.reasons == nil {
				s.reasons = map[*workload.Info]string{}
			}
			s.reasons[c.Info] = c.reason
		}
	}
	return candidates
}

// reasonOr is the reason the victim policy gave for preempting info, or def.
func (s *search) reasonOr(info *workload.Info, def string) string {
	if r := s.reasons[info]; r != "" {
		return r
	}
	return def
}

// allowedByShare records that a fair-sharing strategy allowed preempting info.
func (s *search) allowedByShare(info *workload.Info) {
	if s.byShare == nil {
		s.byShare = map[*workload.Info]bool{}
	}
	s.byShare[info] = true
}

// classicalCandidates gathers the classical search's candidates, judging (and counting) them.
func (p *Preemptor) classicalCandidates(s *search) {
	ctx := &classical.HierarchicalPreemptionCtx{
		Log:               s.log,
		Wl:                s.info.Obj,
		Cq:                s.cq,
		FrsNeedPreemption: s.frsNeedPreemption,
		Requests:          s.workloadUsage.Quota,
		WorkloadOrdering:  p.workloadOrdering,
		Judge:             s,
	}
	classical.NewCandidateIterator(ctx, p.enabledAfs, s.frsNeedPreemption, s.snapshot, p.clock, preemptioncommon.CandidatesOrdering)
}

// fairCandidates gathers the fair-sharing search's candidates, judging (and counting) them.
func (p *Preemptor) fairCandidates(s *search) {
	p.findCandidates(s.log, s.info.Obj, s.cq, s.frsNeedPreemption, s)
}

// targets runs the search.
func (p *Preemptor) targets(s *search) []*Target {
	return p.getTargets(&s.preemptionCtx)
}

// workloadFits reports whether the pending workload fits in the snapshot as it stands.
func (s *search) workloadFits(allowBorrowing bool) bool {
	return workloadFits(&s.preemptionCtx, allowBorrowing)
}

// judged shows the policy's decision d on c to the plugins that observe decisions.
func (s *search) judged(c *policy.Candidate, d policy.Decision) {
	p := s.p
	if !s.judgesRead {
		s.judgesRead = true
		s.judgeHandle = handle{p, s.now, s.log}
		for i, o := range p.judges {
			if p.on(o.feature) {
				s.judgesOn |= 1 << i
			}
		}
	}
	if s.judgesOn == 0 {
		return
	}
	for i, o := range p.judges {
		if s.judgesOn&(1<<i) != 0 {
			o.Judged(&s.judgeHandle, c, d)
		}
	}
}

// judge is a plugin that sees each decision of a search, with its feature.
type judge struct {
	feature policy.Feature
	policy.JudgeObserver
}
