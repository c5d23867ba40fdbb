package plugins

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// orderCandidate builds a candidate of the ordering's facts; seconds are relative to t0.
func orderCandidate(t0 time.Time, uid string, cq bool, prio int64, queued, reserved int64) *policy.Candidate {
	info := &workload.Info{Obj: &kueue.Workload{}, ClusterQueue: "other"}
	info.Obj.UID = types.UID(uid)
	if cq {
		info.ClusterQueue = "cq"
	}
	c := &policy.Candidate{Info: info, Priority: prio % 1000, QueuedAt: t0.Add(time.Duration(queued%100000) * time.Second)}
	if reserved%3 != 0 {
		c.QuotaReservedAt = t0.Add(-time.Duration(reserved%100000) * time.Second)
		c.Admitted, c.AdmittedAt = true, c.QuotaReservedAt
	}
	return c
}

// FuzzOrdering checks that the candidate order is a strict weak order (irreflexive, antisymmetric,
// transitive) on arbitrary triples, so sorting is well defined and deterministic.
func FuzzOrdering(f *testing.F) {
	f.Add(int64(1), int64(10), int64(5), int64(2), int64(10), int64(6), int64(3), int64(10), int64(6), true, false, true, int64(600), false)
	f.Add(int64(5), int64(0), int64(0), int64(5), int64(0), int64(0), int64(5), int64(0), int64(0), false, false, false, int64(0), true)
	policies := map[bool]*policy.Policy{
		false: policy.New(policy.Options{}, timebased.Option()),
		true:  policy.New(policy.Options{LocalQueueFairSharing: true}, timebased.Option()),
	}
	{
		t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		f.Fuzz(func(t *testing.T, pa, ra, qa, pb, rb, qb, pc, rc, qc int64, ca, cb, cc bool, window int64, fair bool) {
			p := policies[fair]
			a := orderCandidate(t0, "a", ca, pa, qa, ra)
			b := orderCandidate(t0, "b", cb, pb, qb, rb)
			c := orderCandidate(t0, "c", cc, pc, qc, rc)
			ctx := &policy.OrderContext{ClusterQueue: "cq", Queue: timebased.Resolved(timebased.Settings{MinAdmitDuration: time.Duration(abs(window)%100000) * time.Second}), Now: t0}
			all := []*policy.Candidate{a, b, c}
			for _, x := range all {
				if p.Compare(ctx, x, x) != 0 {
					t.Fatalf("%s is ordered before itself", x.Info.Obj.UID)
				}
				for _, y := range all {
					if sign(p.Compare(ctx, x, y)) != -sign(p.Compare(ctx, y, x)) {
						t.Fatalf("not antisymmetric for %s, %s", x.Info.Obj.UID, y.Info.Obj.UID)
					}
					for _, z := range all {
						if p.Compare(ctx, x, y) < 0 && p.Compare(ctx, y, z) < 0 && p.Compare(ctx, x, z) >= 0 {
							t.Fatalf("not transitive: %s < %s < %s", x.Info.Obj.UID, y.Info.Obj.UID, z.Info.Obj.UID)
						}
					}
				}
			}
		})
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
