package simulator

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadevict "sigs.k8s.io/kueue/pkg/workload/evict"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// WorkloadSnapshot is the state of a workload that is already in the cluster when the simulation
// starts. Times are offsets from the start, zero or negative.
type WorkloadSnapshot struct {
	// Created is its creation time, which orders the queue.
	Created Duration `yaml:"created,omitempty"`
	// QuotaReserved, when set, is since when it holds quota: it starts admitted, its windows and
	// protections counted from then, and it finishes its duration after then.
	QuotaReserved *Duration `yaml:"quotaReserved,omitempty"`
	// Flavors are the flavors of its admission, by resource; default the first flavor of its
	// ClusterQueue that has quota for the resource.
	Flavors map[string]string `yaml:"flavors,omitempty"`
	// Preempted is its last preemption, which orders turns.
	Preempted *PastPreemption `yaml:"preempted,omitempty"`
}

// PastPreemption is a preemption that happened before the start.
type PastPreemption struct {
	At Duration `yaml:"at,omitempty"`
	// Reason is the Preempted condition's reason (InClusterQueueTimeBased, InCohortReclamation, ...).
	Reason string `yaml:"reason,omitempty"`
}

// snapshot checks a workload's snapshot fields.
func (v *parser) snapshot(p string, w Workload) {
	s := w.Snapshot
	if s == nil {
		return
	}
	sp := child(p, "snapshot")
	if _, set := v.lines[child(p, "arrival")]; set {
		v.errorf(child(p, "arrival"), "a workload with a snapshot is already in the cluster and arrives at the start; leave arrival out")
	}
	if w.Copies > 1 {
		v.errorf(child(p, "copies"), "a workload with a snapshot is one workload; leave copies out")
	}
	if s.Created.Duration > 0 {
		v.errorf(child(sp, "created"), "must not be after the start (zero or negative), not %s", s.Created.Duration)
	}
	if r := s.QuotaReserved; r != nil {
		switch {
		case r.Duration > 0:
			v.errorf(child(sp, "quotaReserved"), "must not be after the start (zero or negative), not %s", r.Duration)
		case r.Duration < s.Created.Duration:
			v.errorf(child(sp, "quotaReserved"), "must not be before snapshot.created (%s), not %s", s.Created.Duration, r.Duration)
		}
	} else if len(s.Flavors) > 0 {
		v.errorf(child(sp, "flavors"), "only applies with quotaReserved")
	}
	if pr := s.Preempted; pr != nil {
		if s.QuotaReserved != nil {
			v.errorf(child(sp, "preempted"), "only applies to a pending workload (Kueue clears the Preempted condition when it reserves quota again)")
		}
		if pr.At.Duration > 0 {
			v.errorf(child(sp, "preempted.at"), "must not be after the start (zero or negative), not %s", pr.At.Duration)
		}
		if pr.Reason == "" {
			v.errorf(child(sp, "preempted.reason"), "required")
		}
	}
}

// snapshotFlavors checks that a holder's flavors are ClusterQueue flavors with quota for the
// resources it asks for.
func (v *parser) snapshotFlavors(w WorkloadSpec) {
	if w.Snapshot == nil || w.Snapshot.QuotaReserved == nil {
		return
	}
	cq := v.s.clusterQueue(w.ClusterQueue)
	for _, r := range slices.Sorted(maps.Keys(w.Snapshot.Flavors)) {
		f := w.Snapshot.Flavors[r]
		p := key(child(w.path, "snapshot.flavors"), r)
		if _, asked := w.Requests[corev1.ResourceName(r)]; !asked {
			v.errorf(p, "the workload does not ask for %s", r)
			continue
		}
		if flavorFor(cq, corev1.ResourceName(r), f) == "" {
			v.errorf(p, "ClusterQueue %s has no quota for %s in flavor %q", cq.Name, r, f)
		}
	}
}

// flavorFor is the flavor named (the first when "") in which cq has quota for resource; "" if none.
func flavorFor(cq *kueue.ClusterQueue, resource corev1.ResourceName, named string) string {
	for _, g := range cq.Spec.ResourceGroups {
		for _, f := range g.Flavors {
			if slices.Contains(g.CoveredResources, resource) && (named == "" || string(f.Name) == named) {
				return string(f.Name)
			}
		}
	}
	return ""
}

// resolvedSnapshot is a workload's snapshot with the flavor of every resource it asks for when it
// holds quota: the snapshot's, or the first flavor of its ClusterQueue with quota for it.
func (s *Scenario) resolvedSnapshot(w WorkloadSpec) *WorkloadSnapshot {
	if w.Snapshot == nil || w.Snapshot.QuotaReserved == nil {
		return w.Snapshot
	}
	out := *w.Snapshot
	out.Flavors = map[string]string{}
	maps.Copy(out.Flavors, w.Snapshot.Flavors)
	cq := s.clusterQueue(w.ClusterQueue)
	for r := range w.Requests {
		if _, ok := out.Flavors[string(r)]; !ok && cq != nil {
			out.Flavors[string(r)] = flavorFor(cq, r, "")
		}
	}
	return &out
}

// snapshotStatus writes the conditions and admission of a workload already in the cluster, as
// Kueue's controllers left them, with Kueue's own helpers at the times of the snapshot.
func snapshotStatus(wl *kueue.Workload, w WorkloadSpec, start time.Time) {
	snap := w.Snapshot
	if pr := snap.Preempted; pr != nil && snap.QuotaReserved == nil {
		at := start.Add(pr.At.Duration)
		evicted := kueue.WorkloadEvictedByPreemption
		if policy.IsOwnReason(pr.Reason) {
			evicted = pr.Reason
		}
		msg := "Preempted before the simulation started"
		workload.SetPreemptedCondition(wl, at, pr.Reason, msg)
		workloadevict.SetEvictedCondition(wl, at, evicted, msg)
		workload.SetRequeuedCondition(wl, evicted, msg, true)
		apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadRequeued).LastTransitionTime = metav1.NewTime(at)
	}
	if snap.QuotaReserved == nil {
		return
	}
	at := start.Add(snap.QuotaReserved.Duration)
	usage := corev1.ResourceList{}
	flavors := map[corev1.ResourceName]kueue.ResourceFlavorReference{}
	for r, q := range w.Requests {
		total := q.DeepCopy()
		total.Mul(int64(w.Pods))
		usage[r] = total
		flavors[r] = kueue.ResourceFlavorReference(snap.Flavors[string(r)])
	}
	workload.SetQuotaReservation(wl, &kueue.Admission{
		ClusterQueue: kueue.ClusterQueueReference(w.ClusterQueue),
		PodSetAssignments: []kueue.PodSetAssignment{{
			Name: PodSetName, Flavors: flavors, ResourceUsage: usage, Count: ptr.To(w.Pods),
		}},
	}, testingclock.NewFakeClock(at))
	workload.SetAdmittedCondition(wl, at, "Admitted", fmt.Sprintf("Admitted in ClusterQueue %s before the simulation started", w.ClusterQueue))
}

// submitSnapshot puts a workload that is already in the cluster at the start into the world,
// with its past: created then, holding quota since then, preempted then. Its job's history starts
// at its creation, or at its last preemption, so waits include the time it already waited.
func (w *world) submitSnapshot(j *job) error {
	snap := j.spec.Snapshot
	wl := j.spec.Workload(w.start.Add(snap.Created.Duration), j.uid)
	if err := w.client.Create(w.ctx, wl); err != nil {
		return fmt.Errorf("creating workload %s: %w", j.spec.Name, err)
	}
	if snap.QuotaReserved != nil || snap.Preempted != nil {
		// Written as the scheduler writes admissions, so that the job controller's later writes
		// (under the same field owner) can take them back.
		err := workloadpatching.PatchAdmissionStatus(w.ctx, w.client, wl, w.clock, func(wl *kueue.Workload) (bool, error) {
			snapshotStatus(wl, j.spec, w.start)
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("writing the status of workload %s: %w", j.spec.Name, err)
		}
	}
	key, latest := j.key, &kueue.Workload{}
	if err := w.client.Get(w.ctx, key, latest); err != nil {
		return fmt.Errorf("reading workload %s: %w", j.spec.Name, err)
	}
	// The event handlers see it as their informer's first list would: already in this state.
	w.dirtyMu.Lock()
	w.dirty.Delete(key)
	w.dirtyMu.Unlock()
	w.seen[key] = latest
	w.versions++
	w.workloads.Create(event.TypedCreateEvent[*kueue.Workload]{Object: latest.DeepCopy()})
	w.byUID[j.uid] = j.spec.Name
	if snap.QuotaReserved != nil {
		// A manager that starts on such a cluster adds its LocalQueues after the Workloads exist,
		// and so knows the queue of every admitted one: when it finishes, the ClusterQueue's
		// waiting workloads are retried. Adding the LocalQueue again does the same here.
		lq := &kueue.LocalQueue{}
		if err := w.client.Get(w.ctx, types.NamespacedName{Namespace: wl.Namespace, Name: string(wl.Spec.QueueName)}, lq); err != nil {
			return fmt.Errorf("reading LocalQueue of workload %s: %w", j.spec.Name, err)
		}
		w.queues.DeleteLocalQueue(w.log, lq)
		if err := w.queues.AddLocalQueue(w.ctx, lq); err != nil {
			return fmt.Errorf("LocalQueue %s/%s: %w", lq.Namespace, lq.Name, err)
		}
	}

	// What it did before its last preemption is not known: its current wait starts there.
	waiting := snap.Created.Duration
	if snap.QuotaReserved == nil && snap.Preempted != nil {
		waiting = max(waiting, snap.Preempted.At.Duration)
	}
	j.arrived(waiting)
	w.events = append(w.events, Event{At: snap.Created.Duration, Kind: EventArrived, Workload: j.spec.Name, ClusterQueue: j.spec.ClusterQueue})
	if r := snap.QuotaReserved; r != nil {
		j.admitted(r.Duration)
		// A job that ran past its duration before the start finishes at the start.
		j.finishAt = max(j.finishAt, 0)
		w.events = append(w.events, Event{At: r.Duration, Kind: EventAdmitted, Workload: j.spec.Name, ClusterQueue: j.spec.ClusterQueue})
	}
	// Only the past comes before the start: keep the events in time order.
	slices.SortStableFunc(w.events, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	return nil
}
