package preemption

import (
	"testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"
)

// TestLastSurvey: the reclaim check reads the survey the explanation made only for the same head
// on the same snapshot, once.
func TestLastSurvey(t *testing.T) {
	head := &workload.Info{Obj: &kueue.Workload{}}
	head.Obj.UID = "head"
	other := &workload.Info{Obj: &kueue.Workload{}}
	other.Obj.UID = "other"
	snap, next := &schdcache.Snapshot{}, &schdcache.Snapshot{}
	kept := &protectedTally{reclaim: 1}
	cases := map[string]struct {
		forget   bool
		wl       *workload.Info
		snapshot *schdcache.Snapshot
		want     *protectedTally
	}{
		"same head, same snapshot": {wl: head, snapshot: snap, want: kept},
		"another head":             {wl: other, snapshot: snap},
		"a later snapshot":         {wl: head, snapshot: next},
		"forgotten":                {forget: true, wl: head, snapshot: snap},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var l lastSurvey
			l.keep(head, snap, kept)
			if tc.forget {
				l.forget()
			}
			if got := l.take(tc.wl, tc.snapshot); got != tc.want {
				t.Errorf("take = %v, want %v", got, tc.want)
			}
			if got := l.take(head, snap); got != nil {
				t.Errorf("second take = %v, want nothing", got)
			}
		})
	}
}
