package simulator

import (
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"

	kueuefeatures "sigs.k8s.io/kueue/pkg/features"
)

// Kueue's PrioritizePreemptorWorkloads follows the manager's default in kueue-timeshare's runs
// and upstream's in the others, unless the scenario sets it.
func TestKueueGateDefaults(t *testing.T) {
	gate := kueuefeatures.PrioritizePreemptorWorkloads
	cases := map[string]struct {
		set  map[string]bool
		mode Mode
		want bool
	}{
		"kueue-timeshare: on, the manager's default": {mode: ModeTimeshare, want: true},
		"upstream: off, upstream's default":          {mode: ModeUpstream, want: false},
		"booster: off, upstream's default":           {mode: ModeBooster, want: false},
		"kueue-timeshare with the gate turned off":   {mode: ModeTimeshare, set: map[string]bool{string(gate): false}, want: false},
		"upstream with the gate turned on":           {mode: ModeUpstream, set: map[string]bool{string(gate): true}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sc := mustParse(t, threeJobs)
			sc.FeatureGates = tc.set
			restore, err := setGates(sc, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			got := utilfeature.DefaultFeatureGate.Enabled(gate)
			restore()
			if got != tc.want {
				t.Errorf("%s = %v, want %v", gate, got, tc.want)
			}
		})
	}
}
