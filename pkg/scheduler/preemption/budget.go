package preemption

import (
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/budget"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// PreemptionLedger is where the preemptor enters the preemptions that budgets pay for (the
// settings store keeps the ledger, see budget.Source).
type PreemptionLedger interface {
	RecordPreemption(wl *kueue.Workload, cq kueue.ClusterQueueReference, at time.Time)
}

// budgetPlugin is the preemption budget's part in the preemptor: it pays for the preemptions
// that went through and counts the preemptors a spent budget held back.
type budgetPlugin struct{}

func (budgetPlugin) Feature() policy.Feature { return budget.Feature }

func (budgetPlugin) afterIssue(p *Preemptor, preemptor *workload.Info, targets []*Target) {
	p.payBudgets(preemptor, targets)
}

func (budgetPlugin) afterSearch(p *Preemptor, s *search, targets []*Target) {
	p.countHeldBack(s, targets)
}

// payBudgets enters the victims of a preemption that went through in the ledger. Only what a
// budget may hold back pays: turns do not, so that rotation never waits on a budget, nor do
// victims of another ClusterQueue than the preemptor's (budget.Option).
func (p *Preemptor) payBudgets(preemptor *workload.Info, targets []*Target) {
	ledger, ok := policy.SourceOf[PreemptionLedger](p.sources)
	if !ok {
		return
	}
	now := p.clock.Now()
	for _, t := range targets {
		if policy.OwnReasonWords()[t.Reason].Turn || t.WorkloadInfo.ClusterQueue != preemptor.ClusterQueue {
			continue
		}
		ledger.RecordPreemption(t.WorkloadInfo.Obj, t.WorkloadInfo.ClusterQueue, now)
	}
}

// countHeldBack counts a preemptor left without victims by a spent budget, once per wait.
func (p *Preemptor) countHeldBack(s *search, targets []*Target) {
	if len(targets) > 0 {
		return
	}
	until, ok := s.protected.unitEnds[budget.RuleSpent]
	if ok && p.decisions.First(string(s.info.Obj.UID)+"/budget/"+until.String(), s.now, until) {
		budget.CountHeldBack(s.cq.Name)
	}
}
