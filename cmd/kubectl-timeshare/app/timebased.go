package app

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
)

// What the queues report shows of time-sharing turns: a ClusterQueue's window, and when each
// holder's turn ends.

// windowOf is cq's minAdmitDuration as the manager's store reads it.
func windowOf(store *queuesettings.Store, cq kueue.ClusterQueueReference) time.Duration {
	return timebased.SettingsOf(store, cq).MinAdmitDuration
}

func windowSetting(cq string, window time.Duration) SettingReport {
	if window == 0 {
		return SettingReport{Name: "minAdmitDuration", Source: "not set on ClusterQueue " + cq + ": no turns (upstream's same-priority rules)"}
	}
	return SettingReport{Name: "minAdmitDuration", Value: window.String(), Source: "ClusterQueue " + cq}
}

// turnEnds sets on a when c's turn under window ends.
func turnEnds(a *AdmittedWorkload, c *policy.Candidate, window time.Duration) {
	if window <= 0 || c.QuotaReservedAt.IsZero() {
		return
	}
	a.TurnEnds = ptrTime(metav1.NewTime(timebased.Settings{MinAdmitDuration: window}.TurnEnds(c)))
	a.TurnSetting = "minAdmitDuration " + window.String()
}
