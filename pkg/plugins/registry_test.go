package plugins

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// TestPrecedenceDocumented: docs/configuration.md lists the features in the table's order.
func TestPrecedenceDocumented(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil; _, err = os.Stat(filepath.Join(dir, "go.mod")) {
		if dir == filepath.Dir(dir) {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = filepath.Dir(dir)
	}
	doc, err := os.ReadFile(filepath.Join(dir, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var got []policy.Feature
	for _, m := range regexp.MustCompile("(?m)^\\| [0-9]+ \\| `([A-Za-z]+)` \\|").FindAllSubmatch(doc, -1) {
		got = append(got, policy.Feature(m[1]))
	}
	if diff := cmp.Diff(Precedence(), got); diff != "" {
		t.Errorf("precedence table in docs/configuration.md (-code +doc):\n%s", diff)
	}
}

// TestFeaturesAreGates: each feature of the table is named after its feature gate.
func TestFeaturesAreGates(t *testing.T) {
	want := []policy.Feature{
		policy.Feature(features.TimeBasedSamePriorityPreemption),
		policy.Feature(features.ExpectedRuntimeRequeue),
		policy.Feature(features.MinRuntimeProtection),
		policy.Feature(features.PreemptionToleration),
		policy.Feature(features.PreemptionNotice),
		policy.Feature(features.PreemptionBudget),
	}
	if diff := cmp.Diff(want, Precedence()); diff != "" {
		t.Errorf("features (-gates +table):\n%s", diff)
	}
}
