package scheduler

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"

	"sigs.k8s.io/kueue/pkg/features"
)

func TestGateTableMatchesModule(t *testing.T) {
	known := utilfeature.DefaultMutableFeatureGate.GetAll()
	seen := map[featuregate.Feature]bool{}
	for _, g := range schedulerGates {
		if seen[g.gate] {
			t.Errorf("%s is listed twice", g.gate)
		}
		seen[g.gate] = true
		spec, ok := known[g.gate]
		if !ok {
			t.Errorf("%s is not a feature gate of the kueue module", g.gate)
			continue
		}
		if spec.Default != g.defaultOn {
			t.Errorf("%s: default in the module is %t, the table says %t", g.gate, spec.Default, g.defaultOn)
		}
		// Upstream behaviour that is on by default is the behaviour users get: it must be ours.
		if g.defaultOn && !g.supported {
			t.Errorf("%s is on by default and must be supported", g.gate)
		}
	}
}

func TestCheckFeatureGatesWithDefaults(t *testing.T) {
	if err := CheckFeatureGates(); err != nil {
		t.Errorf("default gates rejected: %v", err)
	}
}

func TestCheckGates(t *testing.T) {
	table := []gateSupport{
		{gate: "GateA", supported: false},
		{gate: "GateB", supported: true},
		{gate: "GateC", supported: false},
	}
	cases := map[string]struct {
		on      []featuregate.Feature
		wantErr []string
	}{
		"nothing on": {},
		"supported gate on": {
			on: []featuregate.Feature{"GateB"},
		},
		"unsupported gate on": {
			on:      []featuregate.Feature{"GateA", "GateB"},
			wantErr: []string{"feature gate GateA is not supported by the kueue-timeshare scheduler yet"},
		},
		"every unsupported gate is named": {
			on: []featuregate.Feature{"GateA", "GateC"},
			wantErr: []string{
				"feature gate GateA is not supported by the kueue-timeshare scheduler yet",
				"feature gate GateC is not supported by the kueue-timeshare scheduler yet",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			enabled := func(f featuregate.Feature) bool {
				for _, g := range tc.on {
					if g == f {
						return true
					}
				}
				return false
			}
			err := checkGates(table, enabled)
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// An unsupported gate turned on through upstream's global gate stops the check.
func TestCheckGatesReadsGlobalGates(t *testing.T) {
	table := []gateSupport{{gate: features.PrioritizePreemptorWorkloads, supported: false}}
	if err := checkGates(table, features.Enabled); err != nil {
		t.Fatalf("gate off by default, got %v", err)
	}
	features.SetFeatureGateDuringTest(t, features.PrioritizePreemptorWorkloads, true)
	err := checkGates(table, features.Enabled)
	if err == nil || !strings.Contains(err.Error(), "PrioritizePreemptorWorkloads") {
		t.Errorf("want an error naming PrioritizePreemptorWorkloads, got %v", err)
	}
}
