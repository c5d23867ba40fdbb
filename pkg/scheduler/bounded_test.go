package scheduler

import (
	"context"
	"strings"
	"testing"

	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
)

// The preemptor's explanation of a wait may quote annotations (a notice's preemptor); what it adds
// to the head's condition message and event is bounded.
func TestExplainWaitBounded(t *testing.T) {
	cases := map[string]struct {
		note string
		want string
	}{
		"none":  {want: "base"},
		"short": {note: "under notice", want: "base; under notice"},
		"long":  {note: strings.Repeat("x", 64*1024), want: "base; " + strings.Repeat("x", message.MaxLen-len("…")) + "…"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &Scheduler{hooks: Hooks{Wait: func(context.Context, *workload.Info, *schdcache.Snapshot) WaitVerdict {
				return WaitVerdict{Note: tc.note}
			}}}
			e := &entry{inadmissibleMsg: "base"}
			s.explainWait(t.Context(), e, nil)
			if e.inadmissibleMsg != tc.want {
				t.Errorf("message of %d bytes, want %d: %.40q...", len(e.inadmissibleMsg), len(tc.want), e.inadmissibleMsg)
			}
		})
	}
}
