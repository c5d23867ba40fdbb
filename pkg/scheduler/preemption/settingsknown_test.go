package preemption

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/workload"

	tsfeatures "github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// fairSharingConfig is the manager's fairSharing section with fair sharing on or off.
func fairSharingConfig(on bool) *configapi.FairSharing {
	if on {
		return &configapi.FairSharing{}
	}
	return nil
}

// A ClusterQueue whose settings the store has not read yet (just created), or one below a Cohort
// whose settings are not read yet, takes no part in preemption, as preemptor or as victim, until
// they are read. The tree is org <- team-a <- a1 (borrowing), org <- b1 (the preemptor). Only the
// gates that read those settings make it wait: a ClusterQueue's for TimeBasedSamePriorityPreemption
// or MinRuntimeProtection, a Cohort's (min-runtimes only) for MinRuntimeProtection; with neither,
// the outcome is upstream's, as if everything were read (wantRead).
func TestSettingsNotReadYet(t *testing.T) {
	cases := map[string]struct {
		scenario    *snapgen.Scenario
		unknown     kueue.ClusterQueueReference
		unknownCo   kueue.CohortReference
		want        []string
		wantExplain string
		// wantRead is the outcome once everything is read.
		wantRead []string
	}{
		"every ClusterQueue read: the borrower before its own lower-priority workload": {
			scenario: reclaimScenario("1", true), want: []string{"borrower: InCohortReclamation"},
		},
		"every ClusterQueue read: reclaim from the borrower": {
			scenario: reclaimScenario("2", false), want: []string{"borrower: InCohortReclamation"},
		},
		"the preemptor's ClusterQueue not read: no preemption, and it says why": {
			scenario: reclaimScenario("2", false), unknown: "b1",
			wantExplain: "kueue-timeshare has not read ClusterQueue b1's settings yet",
			wantRead:    []string{"borrower: InCohortReclamation"},
		},
		"the borrower's ClusterQueue not read: its workloads are left alone": {
			scenario: reclaimScenario("2", false), unknown: "a1", wantRead: []string{"borrower: InCohortReclamation"},
		},
		"the borrower's ClusterQueue not read: its own lower-priority workload instead": {
			scenario: reclaimScenario("1", true), unknown: "a1", want: []string{"own: InClusterQueue"},
			wantRead: []string{"borrower: InCohortReclamation"},
		},
		"the borrower's parent Cohort not read: its workloads are left alone": {
			scenario: reclaimScenario("2", false), unknownCo: "team-a", wantRead: []string{"borrower: InCohortReclamation"},
		},
		"the borrower's parent Cohort not read: its own lower-priority workload instead": {
			scenario: reclaimScenario("1", true), unknownCo: "team-a", want: []string{"own: InClusterQueue"},
			wantRead: []string{"borrower: InCohortReclamation"},
		},
		"the root Cohort not read: no preemption, and it says why": {
			scenario: reclaimScenario("1", true), unknownCo: "org",
			wantExplain: "kueue-timeshare has not read Cohort org's settings yet",
			wantRead:    []string{"borrower: InCohortReclamation"},
		},
	}
	gateSets := []struct{ timeBased, protection bool }{{true, true}, {true, false}, {false, true}, {false, false}}
	for _, fairSharing := range []bool{false, true} {
		for _, gates := range gateSets {
			for name, tc := range cases {
				t.Run(fmt.Sprintf("fairSharing=%t/timeBased=%t/protection=%t/%s", fairSharing, gates.timeBased, gates.protection, name), func(t *testing.T) {
					featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, tsfeatures.TimeBasedSamePriorityPreemption, gates.timeBased)
					featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, tsfeatures.MinRuntimeProtection, gates.protection)
					ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
					sc := *tc.scenario
					sc.FairSharing = fairSharing
					known := func(cq kueue.ClusterQueueReference) bool { return cq != tc.unknown }
					cohortKnown := func(c kueue.CohortReference) bool { return c != tc.unknownCo }
					p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, fairSharingConfig(fairSharing), false,
						clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil,
						WithSettingsKnown(known), WithCohortSettingsKnown(cohortKnown), WithSources(fakeMinRuntimes{}),
						// Time-based preemption is on as in the manager, with no window set.
						queueSettings(func(kueue.ClusterQueueReference) timebased.Settings { return timebased.Settings{} }))
					info := sc.PendingInfo()
					snap := snapshotOf(t, ctx, &sc)

					want, wantExplain := tc.want, tc.wantExplain
					guarded := (tc.unknown != "" && (gates.timeBased || gates.protection)) || (tc.unknownCo != "" && gates.protection)
					if (tc.unknown != "" || tc.unknownCo != "") && !guarded {
						want, wantExplain = tc.wantRead, ""
					}
					var got []string
					for _, tg := range p.GetTargets(ctx, *info, cpuPreemptAssignment(info), snap) {
						got = append(got, tg.WorkloadInfo.Obj.Name+": "+tg.Reason)
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("targets (-want +got):\n%s", diff)
					}
					if got := p.ExplainWait(ctx, info, snap); got != wantExplain {
						t.Errorf("ExplainWait = %q, want %q", got, wantExplain)
					}
				})
			}
		}
	}
}
