package policy

import (
	"cmp"
	"strings"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	cmputil "sigs.k8s.io/kueue/pkg/util/cmp"
)

// OrderContext is what ordering keys may read besides the two candidates.
type OrderContext struct {
	// ClusterQueue is the preemptor's ClusterQueue.
	ClusterQueue kueue.ClusterQueueReference
	// Queue is what the units resolved about the preemptor's ClusterQueue (Unit.Resolve).
	Queue *QueueFacts
	Now   time.Time
}

// OrderKey is one row of the ordering table. Compare returns a negative number when a should be
// preempted before b, positive when after, and zero to defer to the next key.
type OrderKey struct {
	Name    string
	Compare func(ctx *OrderContext, a, b *Candidate) int
}

// Ordering key names of the standard table, for WithKeysBefore.
const (
	KeyEvicted         = "EvictedFirst"
	KeyOtherQueues     = "OtherClusterQueuesFirst"
	KeyLocalQueueUsage = "BusierLocalQueueFirst"
	KeyPriority        = "LowerPriorityFirst"
	KeyReservation     = "MostRecentlyReservedFirst"
	KeyUID             = "UID"
)

// standardKeys is upstream Kueue's candidate order (CandidatesOrdering in its
// preemption/common package) as a table, one row per tie-breaker, so that features can add rows;
// TestParityWithUpstream holds it to upstream's function.
func standardKeys(o Options) []OrderKey {
	keys := []OrderKey{
		{Name: KeyEvicted, Compare: func(_ *OrderContext, a, b *Candidate) int { return cmputil.CompareBool(a.Evicted, b.Evicted) }},
		{Name: KeyOtherQueues, Compare: func(ctx *OrderContext, a, b *Candidate) int {
			return cmputil.CompareBool(a.Info.ClusterQueue != ctx.ClusterQueue, b.Info.ClusterQueue != ctx.ClusterQueue)
		}},
	}
	if o.LocalQueueFairSharing {
		keys = append(keys, OrderKey{Name: KeyLocalQueueUsage, Compare: busierLocalQueueFirst})
	}
	return append(keys,
		OrderKey{Name: KeyPriority, Compare: func(_ *OrderContext, a, b *Candidate) int { return cmp.Compare(a.Priority, b.Priority) }},
		OrderKey{Name: KeyReservation, Compare: func(ctx *OrderContext, a, b *Candidate) int {
			return reservedAt(b, ctx.Now).Compare(reservedAt(a, ctx.Now))
		}},
		OrderKey{Name: KeyUID, Compare: func(_ *OrderContext, a, b *Candidate) int {
			return strings.Compare(string(a.Info.Obj.UID), string(b.Info.Obj.UID))
		}},
	)
}

// Compare orders two candidates by the key table; the last standard key makes it total.
func (p *Policy) Compare(ctx *OrderContext, a, b *Candidate) int {
	for _, k := range p.keys {
		if c := k.Compare(ctx, a, b); c != 0 {
			return c
		}
	}
	return 0
}

// busierLocalQueueFirst is the LocalQueue usage comparison of CandidatesOrdering; it applies only
// between LocalQueues of one ClusterQueue whose usage is known.
func busierLocalQueueFirst(_ *OrderContext, a, b *Candidate) int {
	ua, ub := a.Info.LocalQueueFSUsage, b.Info.LocalQueueFSUsage
	if a.Info.ClusterQueue != b.Info.ClusterQueue || a.Info.Obj.Spec.QueueName == b.Info.Obj.Spec.QueueName || ua == nil || ub == nil {
		return 0
	}
	return cmp.Compare(*ub, *ua)
}

// reservedAt treats a candidate without a true QuotaReserved condition as reserved just now.
func reservedAt(c *Candidate, now time.Time) time.Time {
	if c.QuotaReservedAt.IsZero() {
		return now
	}
	return c.QuotaReservedAt
}
