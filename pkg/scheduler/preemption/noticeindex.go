package preemption

import (
	"sync"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// NoticeIndex lists the workloads that may be under a preemption notice, so that a preemptor finds
// its victims under notice by looking up a few workloads of its snapshot instead of reading every
// admitted workload of its cohort tree on each search. The snapshot stays the truth: the index may
// list a workload whose notice has ended, never miss one the snapshot shows once it has synced.
// That holds because a notice written here is listed before it is written, before any snapshot
// can show it, and one written by an earlier leader is listed by the Workload informer, whose
// initial list synced decides. A workload leaves the index when it is deleted, or when the
// informer shows it without a notice; but one whose notice was written here stays until the
// informer has shown that very notice, since views older than the write may still arrive.
type NoticeIndex struct {
	mu sync.RWMutex
	// keys holds the listed workloads, each with the notice written here that the informer has
	// not shown yet ("" when none).
	keys   map[workload.Reference]string
	synced func() bool
}

// NewNoticeIndex returns an empty index, not in use until SetSynced.
func NewNoticeIndex() *NoticeIndex {
	return &NoticeIndex{keys: map[workload.Reference]string{}}
}

// SetSynced puts the index in use once synced reports true (the informer feeding Observe has
// delivered its initial list); nil takes it out of use.
func (x *NoticeIndex) SetSynced(synced func() bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.synced = synced
}

// Observe records the Workload as the informer shows it: listed while it carries a notice.
func (x *NoticeIndex) Observe(wl *kueue.Workload) {
	key := workload.Key(wl)
	var notice string
	c := apimeta.FindStatusCondition(wl.Status.Conditions, policy.NoticeCondition)
	noticed := c != nil && c.Status == metav1.ConditionTrue
	if noticed {
		notice = c.Message
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	unseen, listed := x.keys[key]
	switch {
	case listed && unseen != "":
		if notice == unseen {
			x.keys[key] = ""
		}
	case noticed:
		x.keys[key] = ""
	case listed:
		delete(x.keys, key)
	}
}

// Forget drops a deleted Workload.
func (x *NoticeIndex) Forget(key workload.Reference) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.keys, key)
}

// add lists a Workload this process is about to give notice, with its record's message.
func (x *NoticeIndex) add(key workload.Reference, notice string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.keys[key] = notice
}

// listed returns the workloads that may be under notice, or false while the index has not synced
// and every workload must be read.
func (x *NoticeIndex) listed() ([]workload.Reference, bool) {
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

// WithNoticeIndex makes the preemptor find its victims under notice through idx (see NoticeIndex)
// instead of reading every admitted workload of its cohort tree.
func WithNoticeIndex(idx *NoticeIndex) Option {
	return func(c *config) { c.noticeIndex = idx }
}
