package scheduler

import (
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/util/logging"
)

// Upstream's original: logAdmissionAttemptIfVerbose in sigs.k8s.io/kueue/pkg/scheduler.
func logAdmissionAttemptIfVerbose(log logr.Logger, e *entry) {
	logV := log.V(3)
	if !logV.Enabled() {
		return
	}
	args := []any{
		"workload", klog.KObj(e.Obj),
		"clusterQueue", klog.KRef("", string(e.ClusterQueue)),
		"status", e.status,
		"reason", e.inadmissibleMsg,
	}
	if log.V(4).Enabled() {
		args = append(args, "nominatedAssignment", e.assignment)
		args = append(args, "preempted", logging.GetObjectReferences(e.preemptionTargets))
	}
	logV.Info("Workload evaluated for admission", args...)
}

// Upstream's original: logSnapshotIfVerbose in sigs.k8s.io/kueue/pkg/scheduler.
func logSnapshotIfVerbose(log logr.Logger, s *schdcache.Snapshot) {
	if logV := log.V(6); logV.Enabled() {
		s.Log(logV)
	}
}
