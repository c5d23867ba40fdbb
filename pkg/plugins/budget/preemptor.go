package budget

import (
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Recorder is where the preemptor enters the preemptions that budgets pay for: a Ledger, which
// gives the buckets back as the unit's Source.
type Recorder interface {
	RecordPreemption(wl *kueue.Workload, cq kueue.ClusterQueueReference, at time.Time)
}

// Plugin is the budget's part in the preemptor: it pays for the preemptions that went through and
// counts the preemptors a spent budget held back.
type Plugin struct{}

// Feature is the budget's gate.
func (Plugin) Feature() policy.Feature { return Feature }

// Metrics are the plugin's metrics, registered with the manager's (pkg/metrics reads them).
func (Plugin) Metrics() []prometheus.Collector { return []prometheus.Collector{heldBack} }

// AfterIssue enters the victims of a preemption that went through in the ledger. Only what a
// budget may hold back pays: turns do not, so that rotation never waits on a budget, nor do
// victims of another ClusterQueue than the preemptor's (Option).
func (Plugin) AfterIssue(h policy.Handle, preemptor *workload.Info, victims []policy.Victim) {
	ledger, ok := policy.SourceOf[Recorder](h.Sources())
	if !ok {
		return
	}
	now := h.Now()
	for _, v := range victims {
		if w, _ := policy.OwnReasonWordsOf(v.Reason); w.Turn || v.Workload.ClusterQueue != preemptor.ClusterQueue {
			continue
		}
		ledger.RecordPreemption(v.Workload.Obj, v.Workload.ClusterQueue, now)
	}
}

// AfterSearch counts a preemptor left without victims by a spent budget, once per wait.
func (Plugin) AfterSearch(h policy.Handle, s policy.Search) {
	if s.Victims > 0 {
		return
	}
	until, ok := s.VetoEnds[RuleSpent]
	if ok && h.First(string(s.Preemptor.Obj.UID)+"/budget/"+until.String(), until) {
		CountHeldBack(s.ClusterQueue)
	}
}
