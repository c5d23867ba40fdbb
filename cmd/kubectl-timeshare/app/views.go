package app

import (
	"context"
	"io"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
)

// view is what one feature shows in the plugin beyond what its unit says (policy.Unit's Column,
// Status and Shields); a field is nil where the feature shows nothing.
type view struct {
	// holdingColumn follows TURN ENDS in the table of workloads holding quota.
	holdingColumn *holdingColumn
	// holdingDetail and explainDetail say what the feature says of a workload holding quota (in
	// the table) and of one explained, under its gate; ok false when nothing.
	holdingDetail detail
	explainDetail detail
	// holdingNote adds to the state of a workload holding quota and not being evicted; "" when
	// nothing.
	holdingNote func(r *ExplainReport) string
	// waitingDetail completes r, for a waiting workload wl, with what the cluster says of it.
	waitingDetail func(ctx context.Context, c client.Reader, wl *kueue.Workload, r *ExplainReport)
	// explainSection follows a workload's wait and last preemption; it reports whether it had
	// anything to explain.
	explainSection func(w io.Writer, r *ExplainReport, now time.Time) (explained bool, err error)
	// settingRows add the feature's rows to a ClusterQueue's settings, after the min-runtimes, from
	// what the store read for its unit along the ClusterQueue's path (Store.SettingsPath).
	settingRows func(store *queuesettings.Store, cq kueue.ClusterQueueReference, parents []kueue.CohortReference, m ManagerSettings) []SettingReport
}

// detail is what a feature says of a workload, under its gate; ok false when nothing.
type detail func(wl *kueue.Workload) (gate string, v any, ok bool)

// views are the features that show more than their units say, in the registry's order.
func views() []view { return []view{noticeView()} }

// holdingColumns are the views' columns of the table of workloads holding quota.
func holdingColumns() []holdingColumn {
	var out []holdingColumn
	for _, v := range views() {
		if v.holdingColumn != nil {
			out = append(out, *v.holdingColumn)
		}
	}
	return out
}
