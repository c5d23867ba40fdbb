package preemption

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/budget"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// TestPluginsFollowThePrecedenceTable: the preemptor's plugins are listed in the victim policy's
// order, once each, each for a feature the table has.
func TestPluginsFollowThePrecedenceTable(t *testing.T) {
	var got []policy.Feature
	for _, p := range Plugins() {
		got = append(got, p.Feature())
	}
	want := slices.DeleteFunc(plugins.Precedence(), func(f policy.Feature) bool { return !slices.Contains(got, f) })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plugins' features (-precedence order +Plugins):\n%s", diff)
	}
}

// TestPluginsOnChecksTheGate: a plugin's extension points are called only while its feature is
// turned on and its gate is on, and one left out of WithPlugins is never called.
func TestPluginsOnChecksTheGate(t *testing.T) {
	budget := []policy.Feature{budget.Feature}
	cases := map[string]struct {
		features []policy.Feature
		gate     bool
		plugins  []Plugin
		want     int
	}{
		"feature on":                     {features: budget, gate: true, plugins: Plugins(), want: 1},
		"feature on, gate off":           {features: budget, plugins: Plugins()},
		"feature not turned on":          {gate: true, plugins: Plugins()},
		"feature on, its plugin removed": {features: budget, gate: true, plugins: []Plugin{notice.Plugin{}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.PreemptionBudget, tc.gate)
			p := &Preemptor{features: tc.features, plugins: tc.plugins}
			got := 0
			for range pluginsOn[policy.IssueFollower](p) {
				got++
			}
			if got != tc.want {
				t.Errorf("issue followers called: %d, want %d", got, tc.want)
			}
		})
	}
}
