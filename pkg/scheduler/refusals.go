package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/timeutil"
)

// RetryLater is an IssuePreemptions error saying that the API server refused the preemption and
// that the preemptor is not to try again before RetryTime (see preemption.RefusedError).
type RetryLater interface {
	error
	RetryTime() time.Time
	// Message is the sentence added to the preemptor's pending message.
	Message() string
	// HeldBack is true when nothing was written this time: the refusal was reported before.
	HeldBack() bool
}

// heldBack reports whether err is a refusal already reported, not worth an error log again.
func heldBack(err error) bool {
	var rl RetryLater
	return errors.As(err, &rl) && rl.HeldBack()
}

// parkRefusedPreemption parks a preemptor whose preemption the API server refused until its
// retry time, when its queue is woken, instead of retrying it at every cycle: a refused write
// retried at once is a hot loop of failing requests.
func (s *Scheduler) parkRefusedPreemption(ctx context.Context, e *entry, err error) {
	var rl RetryLater
	if !errors.As(err, &rl) {
		return
	}
	// Not immediate, and unlike NoFit it parks no equivalent workload with it.
	e.requeueReason = qcache.RequeueReasonPreemptionGated
	// The message quotes the API server's answer: bounded.
	e.inadmissibleMsg = strings.TrimSuffix(e.inadmissibleMsg, ".") + ". " + message.Bound(message.ForNamespace(rl.Message(), e.Obj.Namespace))
	s.refusalWakes.at(ctx, e.ClusterQueue, rl.RetryTime())
}

// queueWakes wakes ClusterQueues at given times, at most one pending wake-up per queue (the
// earliest).
type queueWakes struct {
	clock clock.Clock
	wake  func(context.Context, kueue.ClusterQueueReference)

	mu   sync.Mutex
	next map[kueue.ClusterQueueReference]time.Time
}

func newQueueWakes(clk clock.Clock, wake func(context.Context, kueue.ClusterQueueReference)) *queueWakes {
	return &queueWakes{clock: clk, wake: wake, next: map[kueue.ClusterQueueReference]time.Time{}}
}

// at wakes cq at t, unless a wake-up no later than t is already set.
func (w *queueWakes) at(ctx context.Context, cq kueue.ClusterQueueReference, t time.Time) {
	after, ok := w.clock.(clock.WithDelayedExecution)
	if !ok || t.IsZero() {
		return
	}
	now := w.clock.Now()
	w.mu.Lock()
	if set, ok := w.next[cq]; ok && set.After(now) && !set.After(t) {
		w.mu.Unlock()
		return
	}
	w.next[cq] = t
	w.mu.Unlock()
	after.AfterFunc(timeutil.Delay(now, t, time.Millisecond), func() {
		w.mu.Lock()
		if w.next[cq].Equal(t) {
			delete(w.next, cq)
		}
		w.mu.Unlock()
		w.wake(context.WithoutCancel(ctx), cq)
	})
}
