package preemption

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/budget"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
)

// fakeLedger is a budget source that remembers what the preemptor pays into it.
type fakeLedger struct{ paid []string }

func (*fakeLedger) BudgetsOf(*kueue.Workload) *budget.Budgets { return nil }

func (l *fakeLedger) RecordPreemption(wl *kueue.Workload, cq kueue.ClusterQueueReference, at time.Time) {
	l.paid = append(l.paid, wl.Name+" in "+string(cq)+" at "+at.UTC().Format(time.TimeOnly))
}

// TestIssuePaysBudgets: a preemption that went through pays for its victims, turns and
// preemptions by another ClusterQueue excepted, and only while the gate is on.
func TestIssuePaysBudgets(t *testing.T) {
	cases := map[string]struct {
		gate bool
		// otherQueue: the preemptor is of another ClusterQueue than its victims (a reclaim).
		otherQueue bool
		want       []string
	}{
		"gate on: the priority preemption pays, the turn does not":  {gate: true, want: []string{"ran-30m0s in cq at 13:00:00"}},
		"gate on: a preemptor of another ClusterQueue pays nothing": {gate: true, otherQueue: true},
		"gate off: nothing is paid":                                 {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.PreemptionBudget, tc.gate)
			ctx := ctrllog.IntoContext(context.Background(), ctrllog.Log)
			w := newIssueWorld(t, ctx, nil, "")
			ledger := &fakeLedger{}
			p := New(w.client, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, w.recorder, nil, false,
				clocktesting.NewFakeClock(w.sc.Now), nil, w.store, nil, WithSources(ledger))
			targets := w.targets(t, map[string]string{"ran-30m0s": kueue.InClusterQueueReason, "ran-2h30m0s": timebased.Reason})
			preemptor := workload.NewInfo(w.sc.Pending)
			preemptor.ClusterQueue = w.cq.Name
			if tc.otherQueue {
				preemptor.ClusterQueue = "lender"
			}
			if _, _, err := p.IssuePreemptions(ctx, w.cache, preemptor, targets, w.cq); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ledger.paid, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("paid (-want +got):\n%s", diff)
			}
		})
	}
}
