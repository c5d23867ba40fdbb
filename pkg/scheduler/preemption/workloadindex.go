package preemption

import (
	"sync"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// WorkloadIndex lists the workloads that a unit may mark (policy.Unit.Marks), so that a preemptor
// finds the ones marked for it by looking up a few workloads of its snapshot instead of reading
// every admitted workload of its cohort tree on each search. The snapshot stays the truth: the
// index may list a workload whose mark has gone, never miss one the snapshot shows once it has
// synced. That holds because a mark written here is listed before it is written, before any
// snapshot can show it, and one written by an earlier leader is listed by the Workload informer,
// whose initial list synced decides. A workload leaves the index when it is deleted, or when the
// informer shows it unmarked; but one whose mark was written here stays until the informer has
// shown that very mark, since views older than the write may still arrive.
type WorkloadIndex struct {
	mu sync.RWMutex
	// keys holds the listed workloads, each with the mark written here that the informer has
	// not shown yet ("" when none).
	keys   map[workload.Reference]string
	synced func() bool
}

// NewWorkloadIndex returns an empty index, not in use until SetSynced.
func NewWorkloadIndex() *WorkloadIndex {
	return &WorkloadIndex{keys: map[workload.Reference]string{}}
}

// SetSynced puts the index in use once synced reports true (the informer feeding Observe has
// delivered its initial list); nil takes it out of use.
func (x *WorkloadIndex) SetSynced(synced func() bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.synced = synced
}

// Observe records the Workload as the informer shows it: listed while a unit marks it.
func (x *WorkloadIndex) Observe(wl *kueue.Workload) {
	key := workload.Key(wl)
	mark, marked := allUnits.Marked(wl)
	x.mu.Lock()
	defer x.mu.Unlock()
	unseen, listed := x.keys[key]
	switch {
	case listed && unseen != "":
		if mark == unseen {
			x.keys[key] = ""
		}
	case marked:
		x.keys[key] = ""
	case listed:
		delete(x.keys, key)
	}
}

// Forget drops a deleted Workload.
func (x *WorkloadIndex) Forget(key workload.Reference) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.keys, key)
}

// add lists a Workload this process is about to mark, with its mark.
func (x *WorkloadIndex) add(key workload.Reference, mark string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.keys[key] = mark
}

// listed returns the workloads that may be marked, or false while the index has not synced
// and every workload must be read.
func (x *WorkloadIndex) listed() ([]workload.Reference, bool) {
	if x == nil {
		return nil, false
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.synced == nil || !x.synced() {
		return nil, false
	}
	out := make([]workload.Reference, 0, len(x.keys))
	for k := range x.keys {
		out = append(out, k)
	}
	return out, true
}

// WithWorkloadIndex makes the preemptor find the workloads marked for it through idx (see
// WorkloadIndex) instead of reading every admitted workload of its cohort tree.
func WithWorkloadIndex(idx *WorkloadIndex) Option {
	return func(c *config) { c.index = idx }
}
