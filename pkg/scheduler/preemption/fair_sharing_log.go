package preemption

import (
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	"sigs.k8s.io/kueue/pkg/workload"
)

// fsEvaluationLogEntry is the first strategy's verdict on one candidate.
type fsEvaluationLogEntry struct {
	TargetWorkload string `json:"targetWorkload"`
	TargetNewShare string `json:"targetNewShare"`
	StrategyPassed bool   `json:"strategyPassed"`
}

// fsStrategyLog gathers the first strategy's verdicts on one target ClusterQueue's candidates,
// logged as one entry: what is the same for all of them is logged once.
type fsStrategyLog struct {
	logV              logr.Logger
	enabled           bool
	targetCq          kueue.ClusterQueueReference
	preemptorNewShare fairsharing.PreemptorNewShare
	targetOldShare    fairsharing.TargetOldShare
	entries           []fsEvaluationLogEntry
}

// Upstream's original: newFsStrategyLog in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func newFsStrategyLog(log logr.Logger, candCQ *fairsharing.TargetClusterQueue, preemptorNewShare fairsharing.PreemptorNewShare, targetOldShare fairsharing.TargetOldShare) fsStrategyLog {
	logV := log.V(4)
	return fsStrategyLog{
		logV:              logV,
		enabled:           logV.Enabled(),
		targetCq:          candCQ.GetTargetCq().Name,
		preemptorNewShare: preemptorNewShare,
		targetOldShare:    targetOldShare,
	}
}

// Upstream's original: (*fsStrategyLog).record in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func (l *fsStrategyLog) record(candWl *workload.Info, targetNewShare fairsharing.TargetNewShare, passed bool) {
	if !l.enabled {
		return
	}
	l.entries = append(l.entries, fsEvaluationLogEntry{
		TargetWorkload: string(workload.Key(candWl.Obj)),
		TargetNewShare: schdcache.DRS(targetNewShare).PreciseWeightedShareSerialized(),
		StrategyPassed: passed,
	})
}

// flush logs what was gathered, once.
// Upstream's original: (*fsStrategyLog).flush in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func (l *fsStrategyLog) flush() {
	if !l.enabled || len(l.entries) == 0 {
		return
	}
	l.logV.Info("Evaluating FairSharing strategy",
		"preemptorNewShare", schdcache.DRS(l.preemptorNewShare).PreciseWeightedShareSerialized(),
		"targetClusterQueue", klog.KRef("", string(l.targetCq)),
		"targetOldShare", schdcache.DRS(l.targetOldShare).PreciseWeightedShareSerialized(),
		"strategyEvaluations", l.entries)
	l.entries = nil
}
