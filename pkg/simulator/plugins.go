package simulator

import (
	"encoding/json"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// What the simulator plays of a feature beyond the manager's parts it runs, asked of the
// feature's plugin (policy.Unit.Plugin), which implements these where it acts so.
type (
	// warner warns a running workload before evicting it; the simulated jobs react to it.
	warner interface {
		Warns() *policy.Warns
	}
	// comparer says whether configuration c and the specs of the ClusterQueues and Cohorts make
	// it act, so that a comparison adds a run with its gate off to show what it changes.
	comparer interface {
		Compared(c *tsconfig.Configuration, specs []json.RawMessage) bool
	}
	// clearer names the annotations its controller removes from a Workload once it is evicted,
	// which the simulator removes in its place.
	clearer interface {
		Clears() []string
	}
)

// warnings are the features' warnings, in the registry's order.
func warnings() []*policy.Warns {
	var out []*policy.Warns
	for _, u := range plugins.Units() {
		if w, ok := u.Plugin.(warner); ok {
			out = append(out, w.Warns())
		}
	}
	return out
}

// warningOf is the warning of event kind event; nil if no feature gives one.
func warningOf(event string) *policy.Warns {
	for _, w := range warnings() {
		if w.Event == event {
			return w
		}
	}
	return nil
}

// cleared are the annotations the features' controllers remove from an evicted Workload.
func cleared() []string {
	var out []string
	for _, u := range plugins.Units() {
		if c, ok := u.Plugin.(clearer); ok {
			out = append(out, c.Clears()...)
		}
	}
	return out
}
