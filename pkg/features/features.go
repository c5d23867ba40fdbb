// Package features registers kueue-timeshare's feature gates in the same process-wide gate as
// upstream Kueue's, so that both `--feature-gates` and the Configuration's featureGates map set them.
package features

import (
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"

	kueuefeatures "sigs.k8s.io/kueue/pkg/features"
)

const (
	// TimeBasedSamePriorityPreemption lets a ClusterQueue's
	// spec.preemption.withinClusterQueueConfig.minAdmitDuration make same-priority workloads
	// preemptible once they have held quota that long (KEP-8522). Off: the field is ignored.
	TimeBasedSamePriorityPreemption featuregate.Feature = "TimeBasedSamePriorityPreemption"

	// MinRuntimeProtection lets preemptMinRuntime and reclaimMinRuntime (on ClusterQueues, Cohorts
	// and the manager configuration) keep running workloads from being chosen as victims until they
	// have run that long. Off: those settings are ignored.
	MinRuntimeProtection featuregate.Feature = "MinRuntimeProtection"

	// PreemptionToleration lets priority classes (WorkloadPriorityClass or PriorityClass) declare,
	// with annotations, that their workloads tolerate preemption by lower priorities than a minimum
	// for some time after admission. Off: the annotations are ignored.
	PreemptionToleration featuregate.Feature = "PreemptionToleration"

	// ExpectedRuntimeRequeue lets workloads annotated with an expected runtime be preempted, once
	// they ran that long, by workloads of equal or higher priority of their ClusterQueue when that
	// lets one be admitted. Off: the annotations are ignored.
	ExpectedRuntimeRequeue featuregate.Feature = "ExpectedRuntimeRequeue"

	// HandoverAfterVictimTermination keeps the quota of a Job preempted for a turn's end or its
	// expected runtime until its Pods have terminated, so that the next holder neither runs beside
	// them nor starts its turn with Pods that cannot be placed. Off: the quota goes when Kueue
	// releases it, as soon as the Job has no active Pods.
	HandoverAfterVictimTermination featuregate.Feature = "HandoverAfterVictimTermination"

	// PreemptionNotice gives a victim whose settings ask for it a notice before its eviction
	// (spec.preemption.noticePeriod, noticeOnPriorityPreemption and noticeOnReclaim on ClusterQueues
	// and Cohorts, and the manager's defaultNoticePeriod). Off: victims are evicted at once, and the
	// webhooks and the configuration loader refuse those settings rather than ignore them.
	PreemptionNotice featuregate.Feature = "PreemptionNotice"

	// PreemptionBudget lets spec.preemption.preemptionBudget (on ClusterQueues and Cohorts) and the
	// manager's preemptionBudget cap how many workloads below a queue, and how often one workload,
	// are preempted per period. Off: the webhooks and the configuration loader refuse them.
	PreemptionBudget featuregate.Feature = "PreemptionBudget"
)

// BudgetGateOff is what a refused budget setting is told while PreemptionBudget is off.
const BudgetGateOff = "needs the PreemptionBudget feature gate, which is off; leave it unset"

// NoticeGateOff is what a refused notice setting is told while PreemptionNotice is off.
const NoticeGateOff = "needs the PreemptionNotice feature gate, which is off; leave it unset or set it to 0s/false"

var gates = map[featuregate.Feature]featuregate.VersionedSpecs{
	TimeBasedSamePriorityPreemption: {
		{Version: version.MustParse("0.19"), Default: true, PreRelease: featuregate.Beta},
	},
	MinRuntimeProtection: {
		{Version: version.MustParse("0.19"), Default: true, PreRelease: featuregate.Beta},
	},
	PreemptionToleration: {
		{Version: version.MustParse("0.19"), Default: true, PreRelease: featuregate.Beta},
	},
	ExpectedRuntimeRequeue: {
		{Version: version.MustParse("0.19"), Default: true, PreRelease: featuregate.Beta},
	},
	HandoverAfterVictimTermination: {
		{Version: version.MustParse("0.19"), Default: true, PreRelease: featuregate.Beta},
	},
	PreemptionNotice: {
		{Version: version.MustParse("0.19"), Default: true, PreRelease: featuregate.Beta},
	},
	PreemptionBudget: {
		{Version: version.MustParse("0.19"), Default: false, PreRelease: featuregate.Alpha},
	},
}

func init() {
	runtime.Must(utilfeature.DefaultMutableFeatureGate.AddVersioned(gates))
}

// KueueDefaults are upstream Kueue gates whose default this manager changes. Time-sharing preempts
// on every turn, so the quota a preemptor frees must go to it: with PrioritizePreemptorWorkloads
// off, an older head of another ClusterQueue can take that quota first, be reclaimed, and the
// preemptor evict its victim again without end (upstream's fix for that loop is this gate, alpha
// and off in v0.19). The Configuration's featureGates and --feature-gates still override them.
var KueueDefaults = map[string]bool{
	string(kueuefeatures.PrioritizePreemptorWorkloads): true,
}

// ApplyKueueDefaults sets KueueDefaults in the process-wide gate; the manager calls it before it
// applies the configured gates.
func ApplyKueueDefaults() error {
	return utilfeature.DefaultMutableFeatureGate.SetFromMap(KueueDefaults)
}

// Enabled reports whether one of our gates is on.
func Enabled(f featuregate.Feature) bool {
	return utilfeature.DefaultFeatureGate.Enabled(f)
}

// Log writes our gates' values, next to upstream's (features.LogFeatureGates).
func Log(log logr.Logger) {
	values := make(map[featuregate.Feature]bool, len(gates))
	for f := range gates {
		values[f] = Enabled(f)
	}
	log.V(2).Info("Loaded kueue-timeshare feature gates", "featureGates", values)
}
