package features

import (
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	kueuefeatures "sigs.k8s.io/kueue/pkg/features"
)

func TestGatesLiveInUpstreamsGate(t *testing.T) {
	cases := map[string]struct {
		set  *bool
		want bool
	}{
		"default (Beta: on)": {want: true},
		"turned off":         {set: ptr(false), want: false},
		"turned on":          {set: ptr(true), want: true},
	}
	for _, gate := range []featuregate.Feature{TimeBasedSamePriorityPreemption, MinRuntimeProtection, PreemptionToleration, ExpectedRuntimeRequeue, HandoverAfterVictimTermination, PreemptionNotice} {
		for name, tc := range cases {
			t.Run(string(gate)+"/"+name, func(t *testing.T) {
				if tc.set != nil {
					featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, gate, *tc.set)
				}
				if got := Enabled(gate); got != tc.want {
					t.Errorf("Enabled = %t, want %t", got, tc.want)
				}
				// Upstream's helper reads the same gate, so configuration and flags reach both.
				if got := kueuefeatures.Enabled(gate); got != tc.want {
					t.Errorf("upstream's features.Enabled = %t, want %t", got, tc.want)
				}
			})
		}
	}
}

func TestAlphaGatesAreOffByDefault(t *testing.T) {
	for _, gate := range []featuregate.Feature{PreemptionBudget} {
		if Enabled(gate) {
			t.Errorf("%s is on by default", gate)
		}
	}
}

func ptr(b bool) *bool { return &b }
