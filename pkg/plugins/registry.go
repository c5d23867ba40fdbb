// Package plugins is the registry of the victim policy's features: the one place the manager,
// the simulator, the webhooks and the kubectl plugin learn which features exist and in which
// order they decide. A feature is added or taken out here; its gate is in package features.
package plugins

import (
	"slices"
	"sync"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/budget"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/expectedruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// registry lists every feature of the victim policy, in precedence order: when several apply to
// one candidate, the one listed first decides. Upstream's rows (Never, Any, LowerPriority,
// NewerEqualPriority) come before every feature's, PriorityNotLower after them; a protection
// vetoes any eligible row. docs/configuration.md shows this table. A unit names its part in the
// preemptor (Unit.Plugin), its source and its controllers.
func registry() policy.Table {
	return policy.Table{
		// Refuses a same-priority candidate when another pending workload has the turn, before
		// expected-runtime could make it eligible; else makes it eligible past minAdmitDuration.
		timebased.Unit(),
		// Makes a candidate past its expected runtime eligible.
		expectedruntime.Unit(),
		// Vetoes an eligible candidate inside its min-runtime.
		minruntime.Unit(),
		// Vetoes an eligible candidate whose priority class tolerates the preemptor.
		toleration.Unit(),
		// Vetoes a candidate whose room is promised to another preemptor by a notice.
		notice.Unit(),
		// Vetoes a candidate whose preemption would overdraw a preemption budget on its path.
		budget.Unit(),
	}
}

// Units is the precedence table: every feature, the one that decides first listed first.
func Units() policy.Table { return slices.Clone(units()) }

// units is the registry's table, built once.
func units() policy.Table {
	unitsOnce.Do(func() { unitsTable = registry() })
	return unitsTable
}

var (
	unitsOnce  sync.Once
	unitsTable policy.Table
)

// Precedence lists the features, the one that decides first.
func Precedence() []policy.Feature { return units().Features() }

// With adds the rules and keys of the named features in the order of the precedence table,
// whatever the order they are named in.
func With(features ...policy.Feature) policy.Option { return units().With(features...) }
