package app

import (
	"time"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// What the plugin shows of a feature, asked of the feature's plugin (policy.Unit.Plugin), which
// implements these where it has something to show.
type (
	// columnShower has a column in the wide table of workloads holding quota.
	columnShower interface {
		Column() *policy.Column
	}
	// shieldGiver gives a running workload protections whatever its ClusterQueue's settings.
	shieldGiver interface {
		Shields(c *policy.Candidate, now time.Time) []policy.Shield
	}
)

// featureColumn is a feature's column.
type featureColumn struct {
	*policy.Column
	feature policy.Feature
}

// featureColumns are the features' columns, in the registry's order.
func featureColumns() []featureColumn {
	var out []featureColumn
	for _, u := range plugins.Units() {
		if c, ok := u.Plugin.(columnShower); ok {
			out = append(out, featureColumn{Column: c.Column(), feature: u.Feature})
		}
	}
	return out
}

// shieldsOf are the protections the features that are on give c at now.
func shieldsOf(c *policy.Candidate, now time.Time, on func(policy.Feature) bool) []policy.Shield {
	var out []policy.Shield
	for _, u := range plugins.Units() {
		if g, ok := u.Plugin.(shieldGiver); ok && on(u.Feature) {
			out = append(out, g.Shields(c, now)...)
		}
	}
	return out
}
