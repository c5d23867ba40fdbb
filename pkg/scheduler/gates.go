package scheduler

import (
	"errors"
	"fmt"

	"k8s.io/component-base/featuregate"

	"sigs.k8s.io/kueue/pkg/features"
)

// gateSupport records one feature gate that upstream's scheduler, flavor assigner or
// preemptor (v0.19.2) reads, and whether this scheduler honours it.
type gateSupport struct {
	gate featuregate.Feature
	// readBy is the upstream package that reads the gate: "scheduler", "flavorassigner",
	// "preemption" or "preemption/common". Gates read only by the flavor assigner or the
	// preemptor are honoured by calling those packages.
	readBy string
	// defaultOn is the gate's default in v0.19.2; the unit test checks it against the
	// module, so that an upgrade that flips a default is noticed.
	defaultOn bool
	// supported is false for a gate whose behaviour this scheduler lacks. Turning such a
	// gate on makes the manager refuse to start.
	supported bool
}

// schedulerGates lists every gate read under upstream's pkg/scheduler.
var schedulerGates = []gateSupport{
	{gate: features.ConcurrentAdmission, readBy: "scheduler", defaultOn: false, supported: true},
	{gate: features.ElasticJobsViaWorkloadSlices, readBy: "scheduler", defaultOn: true, supported: true},
	{gate: features.FairSharingPrioritizeNonBorrowing, readBy: "scheduler", defaultOn: true, supported: true},
	{gate: features.FlavorFungibilityPreserveScanProgress, readBy: "scheduler", defaultOn: true, supported: true},
	{gate: features.MultiKueueOrchestratedPreemption, readBy: "scheduler", defaultOn: false, supported: true},
	{gate: features.PartialAdmission, readBy: "scheduler", defaultOn: true, supported: true},
	{gate: features.PrioritizePreemptorWorkloads, readBy: "scheduler", defaultOn: false, supported: true},
	{gate: features.PrioritySortingWithinCohort, readBy: "scheduler", defaultOn: true, supported: true},
	{gate: features.RecomputeAssignmentUponPreemptionTargetsOverlap, readBy: "scheduler", defaultOn: false, supported: true},
	{gate: features.TASFailedNodeReplacementFailFast, readBy: "scheduler", defaultOn: true, supported: true},
	{gate: features.TASRecomputeAssignmentWithinSchedulingCycle, readBy: "scheduler", defaultOn: true, supported: true},
	{gate: features.TopologyAwareScheduling, readBy: "scheduler", defaultOn: true, supported: true},
	{gate: features.ElasticJobsViaWorkloadSlicesWithTAS, readBy: "flavorassigner", defaultOn: false, supported: true},
	{gate: features.FlavorFungibility, readBy: "flavorassigner", defaultOn: true, supported: true},
	{gate: features.QuotaCheckStrategy, readBy: "flavorassigner", defaultOn: true, supported: true},
	{gate: features.UnadmittedWorkloadsObservability, readBy: "flavorassigner", defaultOn: false, supported: true},
	{gate: features.FairSharingPreemptWithinNominal, readBy: "preemption", defaultOn: true, supported: true},
	{gate: features.SchedulerTimestampPreemptionBuffer, readBy: "preemption/common", defaultOn: false, supported: true},
}

// CheckFeatureGates returns an error naming every enabled gate this scheduler does not
// implement. The manager calls it once the gates are applied, so that a configuration
// asking for upstream behaviour we lack fails at start instead of being ignored.
func CheckFeatureGates() error {
	return checkGates(schedulerGates, features.Enabled)
}

func checkGates(table []gateSupport, enabled func(featuregate.Feature) bool) error {
	var errs []error
	for _, g := range table {
		if !g.supported && enabled(g.gate) {
			errs = append(errs, fmt.Errorf("feature gate %s is not supported by the kueue-timeshare scheduler yet", g.gate))
		}
	}
	return errors.Join(errs...)
}
