package expectedruntime

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy/policytest"
)

// TestJudgedCountsOncePerOutcome: each search that judges a candidate shows it to the plugin;
// the metrics count a nomination or a skip once per workload, admission and outcome.
func TestJudgedCountsOncePerOutcome(t *testing.T) {
	const role = "judged-test"
	running := func(uid string, er *annotations.ExpectedRuntimeSettings) *policy.Candidate {
		c := withFact(policy.Candidate{Info: &workload.Info{Obj: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: types.UID("uid-" + uid)}}},
			Admitted: true, AdmittedAt: t0.Add(-2 * time.Hour)}, er)
		return c
	}
	past := running("past", &annotations.ExpectedRuntimeSettings{Expected: time.Hour})
	cooling := running("cooling", &annotations.ExpectedRuntimeSettings{Expected: time.Hour, NotBefore: t0.Add(time.Minute)})
	young := running("young", &annotations.ExpectedRuntimeSettings{Expected: 3 * time.Hour})
	none := running("none", nil)
	eligible := policy.Decision{Eligible: true, Rule: Rule}
	vetoed := policy.Decision{Rule: minruntime.Rule}
	steps := []struct {
		name      string
		c         *policy.Candidate
		d         policy.Decision
		nominated float64
		skipped   map[string]float64
	}{
		{name: "nominated", c: past, d: eligible, nominated: 1},
		{name: "nominated again, in a later search", c: past, d: eligible, nominated: 1},
		{name: "in its cooldown: a skip", c: cooling, d: policy.Decision{Rule: policy.RuleNotLower}, nominated: 1,
			skipped: map[string]float64{annotations.SkipCooldown: 1}},
		{name: "nominated, but min-runtime vetoes it: a skip", c: past, d: vetoed, nominated: 1,
			skipped: map[string]float64{annotations.SkipCooldown: 1, annotations.SkipMinRuntime: 1}},
		{name: "not long enough yet: nothing to count", c: young, d: policy.Decision{Rule: policy.RuleNotLower}, nominated: 1,
			skipped: map[string]float64{annotations.SkipCooldown: 1, annotations.SkipMinRuntime: 1}},
		{name: "not opted in: nothing to count", c: none, d: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority}, nominated: 1,
			skipped: map[string]float64{annotations.SkipCooldown: 1, annotations.SkipMinRuntime: 1}},
	}
	h := &policytest.Handle{At: t0, ReplicaOf: role}
	for _, step := range steps {
		Plugin{}.Judged(h, step.c, step.d)
		if got := testutil.ToFloat64(nominations.WithLabelValues(role)); got != step.nominated {
			t.Fatalf("%s: nominations = %v, want %v", step.name, got, step.nominated)
		}
		for _, skip := range []string{annotations.SkipCooldown, annotations.SkipMinRuntime} {
			if got := testutil.ToFloat64(nominationsSkipped.WithLabelValues(skip, role)); got != step.skipped[skip] {
				t.Fatalf("%s: skipped for %s = %v, want %v", step.name, skip, got, step.skipped[skip])
			}
		}
	}
}

// TestChanges: a running candidate that opted in changes when it is nominated, and not while
// the feature is off.
func TestChanges(t *testing.T) {
	cases := map[string]struct {
		c    *policy.Candidate
		s    policy.WakeSettings
		want []policy.Change
	}{
		"expected-runtime requeue off": {
			c: withFact(policy.Candidate{Admitted: true, AdmittedAt: t0}, &annotations.ExpectedRuntimeSettings{Expected: time.Minute}),
			s: policy.WakeSettings{Enabled: func(f policy.Feature) bool { return f != Feature }},
		},
		"expected runtime reached": {
			c:    withFact(policy.Candidate{Admitted: true, AdmittedAt: t0}, &annotations.ExpectedRuntimeSettings{Expected: time.Minute}),
			want: []policy.Change{{At: t0.Add(time.Minute)}},
		},
		"expected runtime reached during a cooldown: nominated when it ends": {
			c:    withFact(policy.Candidate{Admitted: true, AdmittedAt: t0}, &annotations.ExpectedRuntimeSettings{Expected: time.Minute, NotBefore: t0.Add(time.Hour)}),
			want: []policy.Change{{At: t0.Add(time.Hour)}},
		},
		"Pods not ready under the PodsReady clock: no instant known": {
			c: withFact(policy.Candidate{Admitted: true, AdmittedAt: t0, NotStarted: true}, &annotations.ExpectedRuntimeSettings{Expected: time.Minute}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.s.Units = policy.Table{Unit()}
			got := policy.Changes(tc.c, tc.s)
			got = slices.DeleteFunc(got, func(c policy.Change) bool { return c.At.IsZero() })
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(time.Time.Equal), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Changes (-want +got):\n%s", diff)
			}
		})
	}
}
