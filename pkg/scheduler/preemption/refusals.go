package preemption

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/timeutil"
)

// Backoff of a preemptor whose evictions or notices the API server refused: doubled from
// refusalBackoffBase at each refusal in a row, up to refusalBackoffMax, or up to
// transientBackoffMax when the error says nothing against the write (the API server or the
// network failing, throttling), so that the preemption goes through within seconds of the
// server's return.
const (
	refusalBackoffBase  = time.Second
	refusalBackoffMax   = 5 * time.Minute
	transientBackoffMax = 5 * time.Second
	// refusalMemory is how long a refusal is remembered after its last retry time; a preemptor
	// gone by then is forgotten.
	refusalMemory = time.Hour
)

// RefusedError says that the API server refused to evict (or to give notice to) a preemptor's
// targets. The preemptor waits until RetryAt before it writes again; a refusal that cannot succeed
// on retry (the write is invalid) is Final, and is written again only once one of the targets has
// changed. Held is true when the refusal kept this attempt from writing at all.
type RefusedError struct {
	Err     error
	Targets string
	RetryAt time.Time
	Final   bool
	Held    bool
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the API server refused the preemption of %s: %v", e.Targets, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// HeldBack reports whether the refusal kept this attempt from writing (see scheduler.RetryLater).
func (e *RefusedError) HeldBack() bool { return e.Held }

// RetryTime is when the preemptor may write again (see scheduler.RetryLater).
func (e *RefusedError) RetryTime() time.Time { return e.RetryAt }

// Message is the sentence added to the preemptor's pending message.
func (e *RefusedError) Message() string {
	if e.Final {
		return fmt.Sprintf("The API server refused the preemption of %s (%v); it is not retried until they change", e.Targets, e.Err)
	}
	return fmt.Sprintf("The API server refused the preemption of %s (%v); retrying at %s", e.Targets, e.Err, e.RetryAt.UTC().Format(time.RFC3339))
}

// isFinal reports whether a refusal cannot succeed on retry of the same write.
func isFinal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err)
}

// isTransient reports whether err is the API server's or the network's failure rather than an
// answer to the write: the same write may succeed as soon as they recover.
func isTransient(err error) bool {
	var netErr net.Error
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr)
}

// isRefusal reports whether err is a refusal to back off from. A conflict (the snapshot was older
// than the object) and a target already gone are the ordinary course of a cycle, retried at once.
func isRefusal(err error) bool {
	return err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !errors.Is(err, context.Canceled)
}

type refusal struct {
	failures int
	retryAt  time.Time
	final    bool
	err      error
	// targets are the refused targets' resourceVersions, by UID.
	targets map[types.UID]string
	names   string
}

// refusals remembers, per preemptor, the last refused preemption.
type refusals struct {
	mu          sync.Mutex
	byPreemptor map[types.UID]*refusal
}

func newRefusals() *refusals {
	return &refusals{byPreemptor: map[types.UID]*refusal{}}
}

// held returns the refusal that keeps preemptor from writing to targets now, if any: one whose
// backoff has not run out, or a final one for the same targets, none of them changed since.
func (r *refusals) held(preemptor types.UID, targets []*Target, now time.Time) *RefusedError {
	r.mu.Lock()
	defer r.mu.Unlock()
	rf := r.byPreemptor[preemptor]
	if rf == nil {
		return nil
	}
	if rf.final {
		if !sameTargets(rf.targets, targets) {
			return nil
		}
		// Looked at again after the longest backoff: a retry time in the past would have the
		// preemptor's queue woken at once, cycle after cycle.
		if !now.Before(rf.retryAt) {
			rf.retryAt = now.Add(refusalBackoffMax)
		}
		return &RefusedError{Err: rf.err, Targets: rf.names, RetryAt: rf.retryAt, Final: true, Held: true}
	}
	if !now.Before(rf.retryAt) {
		return nil
	}
	return &RefusedError{Err: rf.err, Targets: rf.names, RetryAt: rf.retryAt, Held: true}
}

// refused records that the API server refused to preempt targets for preemptor, and returns what
// the preemptor is told; first is true the first time a final refusal of these targets is seen,
// when it is reported.
func (r *refusals) refused(preemptor types.UID, targets []*Target, err error, now time.Time) (out *RefusedError, first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetOld(now)
	rf := r.byPreemptor[preemptor]
	final := isFinal(err)
	first = final && (rf == nil || !rf.final || !sameTargets(rf.targets, targets))
	if rf == nil || final != rf.final {
		rf = &refusal{}
		r.byPreemptor[preemptor] = rf
	}
	rf.failures++
	rf.final = final
	rf.err = err
	rf.targets = versions(targets)
	rf.names = targetNames(targets)
	// A final refusal is looked at again after the longest backoff, in case a target changed
	// without an event that wakes its queue.
	backoff := refusalBackoffMax
	if !final {
		limit := refusalBackoffMax
		if isTransient(err) {
			limit = transientBackoffMax
		}
		backoff = timeutil.Mul(refusalBackoffBase, 1<<min(rf.failures-1, 20))
		backoff = min(backoff, limit)
	}
	rf.retryAt = now.Add(backoff)
	return &RefusedError{Err: err, Targets: rf.names, RetryAt: rf.retryAt, Final: final}, first
}

// succeeded forgets preemptor's refusals.
func (r *refusals) succeeded(preemptor types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byPreemptor, preemptor)
}

// forgetOld drops refusals not looked at for refusalMemory, so that preemptors deleted while held
// are not remembered for ever.
func (r *refusals) forgetOld(now time.Time) {
	for uid, rf := range r.byPreemptor {
		if now.Sub(rf.retryAt) > refusalMemory {
			delete(r.byPreemptor, uid)
		}
	}
}

func versions(targets []*Target) map[types.UID]string {
	out := make(map[types.UID]string, len(targets))
	for _, t := range targets {
		out[t.WorkloadInfo.Obj.UID] = t.WorkloadInfo.Obj.ResourceVersion
	}
	return out
}

func sameTargets(was map[types.UID]string, targets []*Target) bool {
	if len(was) != len(targets) {
		return false
	}
	for _, t := range targets {
		if rv, ok := was[t.WorkloadInfo.Obj.UID]; !ok || rv != t.WorkloadInfo.Obj.ResourceVersion {
			return false
		}
	}
	return true
}

// targetNames lists the targets for a message, the first three by name.
func targetNames(targets []*Target) string {
	const shown = 3
	var parts []string
	for i, t := range targets {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(targets)-shown))
			break
		}
		parts = append(parts, klog.KObj(t.WorkloadInfo.Obj).String())
	}
	if len(targets) == 1 {
		return "workload " + parts[0]
	}
	return "workloads " + strings.Join(parts, ", ")
}
