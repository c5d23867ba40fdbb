package policy

import (
	"fmt"
	"slices"
)

// Feature names one of this project's features on the victim policy (the name of its feature
// gate).
type Feature string

const (
	FeatureTimeBased       Feature = "TimeBasedSamePriorityPreemption"
	FeatureExpectedRuntime Feature = "ExpectedRuntimeRequeue"
	FeatureMinRuntime      Feature = "MinRuntimeProtection"
	FeatureToleration      Feature = "PreemptionToleration"
	FeatureNotice          Feature = "PreemptionNotice"
)

// precedence is the precedence table: when several features apply to one candidate, the one
// listed first decides. Upstream's rows (Never, Any, LowerPriority, NewerEqualPriority) come
// before every feature's, PriorityNotLower after them; a protection vetoes any eligible row.
// docs/configuration.md shows this table.
// Each row also names when the feature's decisions about a running candidate change (see Changes).
var precedence = []precedenceRow{
	// Refuses a same-priority candidate when another pending workload has the turn, before
	// expected-runtime could make it eligible; else makes it eligible past minAdmitDuration.
	{FeatureTimeBased, WithTimeBasedPreemption, timeBasedChanges},
	// Makes a candidate past its expected runtime eligible.
	{FeatureExpectedRuntime, WithExpectedRuntimeRequeue, expectedRuntimeChanges},
	// Vetoes an eligible candidate inside its min-runtime.
	{FeatureMinRuntime, WithMinRuntimeProtection, minRuntimeChanges},
	// Vetoes an eligible candidate whose priority class tolerates the preemptor.
	{FeatureToleration, WithPreemptionToleration, tolerationChanges},
	// Vetoes a candidate whose room is promised to another preemptor by a notice.
	{FeatureNotice, WithPreemptionNotice, noticeChanges},
}

type precedenceRow struct {
	feature Feature
	option  func() Option
	changes func(*Candidate, WakeSettings, func(Change))
}

// Precedence lists the features, the one that decides first.
func Precedence() []Feature {
	out := make([]Feature, len(precedence))
	for i, p := range precedence {
		out[i] = p.feature
	}
	return out
}

// WithFeatures adds the rules and keys of the named features in the order of the precedence
// table, whatever the order they are named in.
func WithFeatures(features ...Feature) Option {
	for _, f := range features {
		if !slices.ContainsFunc(precedence, func(row precedenceRow) bool { return row.feature == f }) {
			panic(fmt.Sprintf("policy: no feature named %q", f))
		}
	}
	return func(p *Policy) {
		for _, row := range precedence {
			if slices.Contains(features, row.feature) {
				row.option()(p)
			}
		}
	}
}
