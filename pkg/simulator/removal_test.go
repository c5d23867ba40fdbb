package simulator

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption"
)

// TestFeatureRemovalInTheSimulator runs every example with each feature taken out of the
// preemptor in turn (its unit out of the policy's table and its plugin out of the preemptor's
// list, its gate still on): each run is the run with that feature's gate off, workload for
// workload and event for event. A feature is removed in one place and leaves the rest whole.
func TestFeatureRemovalInTheSimulator(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "scenarios", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	units := policy.Units()
	if got, want := len(units), 6; got != want {
		t.Fatalf("%d features in the registry, want %d", got, want)
	}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range units {
			t.Run(filepath.Base(f)+"/"+string(u.Feature), func(t *testing.T) {
				plugins := slices.DeleteFunc(preemption.Plugins(), func(p preemption.Plugin) bool { return p.Feature() == u.Feature })
				removed, err := Run(context.Background(), s, Options{Mode: ModeTimeshare, preemptorOptions: []preemption.Option{
					preemption.WithUnits(units.Without(u.Feature)), preemption.WithPlugins(plugins...)}})
				if err != nil {
					t.Fatal(err)
				}
				off := mustRun(t, s, ModeWithout(u.Feature))
				if diff := cmp.Diff(off, removed, cmpopts.IgnoreFields(Result{}, "Mode", "Cycles")); diff != "" {
					t.Errorf("removed (+) against gate off (-):\n%s", diff)
				}
			})
		}
	}
}
