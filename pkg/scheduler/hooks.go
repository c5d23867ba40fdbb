package scheduler

import (
	"context"

	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Hooks are the admission loop's extension points besides choosing victims, in the order a
// cycle reaches them. The preemptor gives them (Preemptor.Hooks). A nil field keeps upstream's
// behaviour, so the zero value is upstream's loop.
type Hooks struct {
	// SubstituteHead, for preemptors that keep a turn order of their own in some ClusterQueues:
	// for a queue head that must wait for its turn, it returns the pending workload of the same
	// ClusterQueue to try instead, or nil to keep the head.
	SubstituteHead func(ctx context.Context, head *workload.Info, snapshot *schdcache.Snapshot) *workload.Info

	// VetoAdmission may hold back a workload that fits, to keep an order of the preemptor's own
	// (with time-based preemption, a workload rotated out does not take quota back from those
	// that waited longer for a turn); it returns why, or "" to let it be admitted.
	VetoAdmission func(ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot) string

	// Wait gives the preemptor's verdict on a head that found no victims: see WaitVerdict.
	Wait func(ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot) WaitVerdict

	// RefusalsDependOnWorkload reports whether the preemptor's refusal of wl in this cycle can
	// depend on the pending workload itself, not only on its shape (with time-based preemption,
	// on whose turn it is). Then the queue must not park workloads of the same shape along with
	// it, as it does for NoFit and PreemptionNoCandidates (SchedulingEquivalenceHashing).
	RefusalsDependOnWorkload func(wl *workload.Info) bool

	// CannotUseTurn reports whether this cycle found that wl, refused, could not use a turn even
	// if it had one: a head that stepped aside for it then gets its place back at once.
	CannotUseTurn func(wl *workload.Info) bool
}

// WaitVerdict is what the preemptor says of a head that found no victims.
type WaitVerdict struct {
	// Note says why it waits, beyond the flavor assigner's message (for example until when its
	// ClusterQueue's running workloads are protected), or "".
	Note string
	// HoldQuota: the preemptor's protections keep the head's ClusterQueue from reclaiming its
	// quota for a while. The head then keeps the quota it waits for out of reach of the rest of
	// the cohort, even in a ClusterQueue that upstream trusts to reclaim later (reclaimWithinCohort:
	// Any), and stays active in the queue so that it does so every cycle: parked, it would let
	// new borrowers take each piece of quota that frees up, each starting a new protection.
	HoldQuota bool
}
