package scheduler

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
)

// The preemptor's explanation of a wait may quote annotations (a notice's preemptor); what it adds
// to the head's condition message and event is bounded, and names no workload of another
// namespace.
func TestExplainWaitBounded(t *testing.T) {
	cases := map[string]struct {
		note string
		want string
	}{
		"none":  {want: "base"},
		"short": {note: "under notice", want: "base; under notice"},
		"long":  {note: strings.Repeat("x", 64*1024), want: "base; " + strings.Repeat("x", message.MaxLen-len("…")) + "…"},
		"naming workloads of its own namespace and of another": {
			note: "its preemption notice for team-a/job-a; waiting for team-b/job-b",
			want: "base; its preemption notice for team-a/job-a; waiting for a workload of another namespace",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &Scheduler{hooks: Hooks{Wait: func(context.Context, *workload.Info, *schdcache.Snapshot) WaitVerdict {
				return WaitVerdict{Note: tc.note}
			}}}
			e := &entry{inadmissibleMsg: "base", Head: qcache.Head{Info: workload.Info{Obj: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "w"}}}}}
			s.explainWait(t.Context(), e, nil)
			if e.inadmissibleMsg != tc.want {
				t.Errorf("message of %d bytes, want %d: %.40q...", len(e.inadmissibleMsg), len(tc.want), e.inadmissibleMsg)
			}
		})
	}
}
