package simulator

import (
	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
)

// headsPerCycle is the scenario's timeshare.headsPerCycle; the comparison modes run upstream's
// loop, one head per ClusterQueue per cycle.
func headsPerCycle(mode Mode, ts *tsconfig.Configuration) int {
	if mode == ModeUpstream || mode == ModeBooster || ts.HeadsPerCycle == nil {
		return 1
	}
	return int(*ts.HeadsPerCycle)
}
