package simulator

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
)

// TestFeatureRemovalInTheSimulator runs every example with each feature taken out of the
// preemptor and the waker in turn (its unit out of the policy's table and its plugin out of the
// preemptor's list, its gate still on): each run is the run with that feature's gate off, cycle
// for cycle and event for event. A feature is removed in one place and leaves the rest whole.
func TestFeatureRemovalInTheSimulator(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "scenarios", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	units := plugins.Units()
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
				removed, err := Run(context.Background(), s, Options{Mode: ModeTimeshare, removed: u.Feature})
				if err != nil {
					t.Fatal(err)
				}
				off := mustRun(t, s, ModeWithout(u.Feature))
				if diff := cmp.Diff(off, removed, cmpopts.IgnoreFields(Result{}, "Mode"), cmpopts.EquateNaNs()); diff != "" {
					t.Errorf("removed (+) against gate off (-):\n%s", diff)
				}
			})
		}
	}
}

// TestFeatureRemovalOnGeneratedScenarios: the rotation checker's generated scenarios (several
// ClusterQueues and Cohorts, time-sharing, min-runtimes, expected runtimes, borrowing) run without
// each feature as they run with its gate off.
func TestFeatureRemovalOnGeneratedScenarios(t *testing.T) {
	const cases = 4
	seed := *rotationSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	for _, u := range plugins.Units() {
		t.Run(string(u.Feature), func(t *testing.T) {
			for i := range cases {
				s := seed + int64(i)
				sc, err := Parse(fmt.Sprintf("generated-%d.yaml", s), []byte(generate(s).YAML()))
				if err != nil {
					t.Fatal(err)
				}
				removed, err := Run(context.Background(), sc, Options{Mode: ModeTimeshare, removed: u.Feature})
				if err != nil {
					t.Fatal(err)
				}
				off := mustRun(t, sc, ModeWithout(u.Feature))
				if diff := cmp.Diff(off, removed, cmpopts.IgnoreFields(Result{}, "Mode"), cmpopts.EquateNaNs()); diff != "" {
					t.Fatalf("seed %d (-rotation-seed=%d): removed (+) against gate off (-):\n%s", s, s, diff)
				}
			}
		})
	}
}
