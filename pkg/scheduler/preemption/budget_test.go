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
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// fakeLedger is a budget source that remembers what the preemptor pays into it.
type fakeLedger struct{ paid []string }

func (*fakeLedger) BudgetsOf(*kueue.Workload) *policy.Budgets { return nil }

func (l *fakeLedger) RecordPreemption(wl *kueue.Workload, cq kueue.ClusterQueueReference, at time.Time) {
	l.paid = append(l.paid, wl.Name+" in "+string(cq)+" at "+at.UTC().Format(time.TimeOnly))
}

// TestIssuePaysBudgets: a preemption that went through pays for its victims, turns excepted,
// and only while the gate is on.
func TestIssuePaysBudgets(t *testing.T) {
	cases := map[string]struct {
		gate bool
		want []string
	}{
		"gate on: the priority preemption pays, the turn does not": {gate: true, want: []string{"ran-30m0s in cq at 13:00:00"}},
		"gate off: nothing is paid":                                {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.PreemptionBudget, tc.gate)
			ctx := ctrllog.IntoContext(context.Background(), ctrllog.Log)
			w := newIssueWorld(t, ctx, nil, "")
			ledger := &fakeLedger{}
			p := New(w.client, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, w.recorder, nil, false,
				clocktesting.NewFakeClock(w.sc.Now), nil, w.store, nil, WithSources(ledger))
			targets := w.targets(t, map[string]string{"ran-30m0s": kueue.InClusterQueueReason, "ran-2h30m0s": policy.TimeBasedReason})
			if _, _, err := p.IssuePreemptions(ctx, w.cache, workload.NewInfo(w.sc.Pending), targets, w.cq); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ledger.paid, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("paid (-want +got):\n%s", diff)
			}
		})
	}
}
