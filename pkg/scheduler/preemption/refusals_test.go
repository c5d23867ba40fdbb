package preemption

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
)

// TestRefusedPreemptionBacksOff: an eviction the API server refuses is not written again at every
// cycle. A refusal that may pass later is retried after 1 s, 2 s, 4 s...; one that cannot (the
// write is invalid) is said once and written again only once the victim has changed.
func TestRefusedPreemptionBacksOff(t *testing.T) {
	const victim = "ran-2h30m0s"
	gr := schema.GroupResource{Group: kueue.SchemeGroupVersion.Group, Resource: "workloads"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: kueue.SchemeGroupVersion.Group, Kind: "Workload"}, victim,
		field.ErrorList{field.Invalid(field.NewPath("status", "conditions"), "x", "refused by a policy")})
	type attempt struct {
		// at is the time since the first attempt.
		at time.Duration
		// changeVictim changes the victim (its resourceVersion) before this attempt.
		changeVictim bool
		// writes are the eviction requests of this attempt.
		writes int
		held   bool
		// retryIn is the wait the attempt asks for, from its own time; 0: none (no refusal).
		retryIn time.Duration
	}
	cases := map[string]struct {
		reason   string
		answer   error
		attempts []attempt
		// wantWarnings are the PreemptionRefused events on the preemptor.
		wantWarnings int
	}{
		"server error, our reason: retried after 1 s, 2 s, 4 s, never between": {
			reason: timebased.Reason,
			answer: apierrors.NewInternalError(context.DeadlineExceeded),
			attempts: []attempt{
				{at: 0, writes: 1, retryIn: time.Second},
				{at: 500 * time.Millisecond, held: true, retryIn: 500 * time.Millisecond},
				{at: time.Second, writes: 1, retryIn: 2 * time.Second},
				{at: 2900 * time.Millisecond, held: true, retryIn: 100 * time.Millisecond},
				{at: 3 * time.Second, writes: 1, retryIn: 4 * time.Second},
			},
		},
		"server error, upstream's reason through upstream's issuer: the same backoff": {
			reason: kueue.InClusterQueueReason,
			answer: apierrors.NewServiceUnavailable("try later"),
			attempts: []attempt{
				{at: 0, writes: 1, retryIn: time.Second},
				{at: 900 * time.Millisecond, held: true, retryIn: 100 * time.Millisecond},
				{at: time.Second, writes: 1, retryIn: 2 * time.Second},
			},
		},
		"throttled: the backoff is capped at five seconds, so that it goes through soon after the server recovers": {
			reason: timebased.Reason,
			answer: apierrors.NewTooManyRequests("slow down", 1),
			attempts: []attempt{
				{at: 0, writes: 1, retryIn: time.Second},
				{at: time.Hour, writes: 1, retryIn: 2 * time.Second},
				{at: 2 * time.Hour, writes: 1, retryIn: 4 * time.Second},
				{at: 3 * time.Hour, writes: 1, retryIn: 5 * time.Second},
				{at: 4 * time.Hour, writes: 1, retryIn: 5 * time.Second},
			},
		},
		"forbidden (a policy or an admission webhook said no): the backoff is capped at five minutes": {
			reason: timebased.Reason,
			answer: apierrors.NewForbidden(gr, victim, errors.New("denied by a policy")),
			attempts: []attempt{
				{at: 0, writes: 1, retryIn: time.Second},
				{at: time.Hour, writes: 1, retryIn: 2 * time.Second},
				{at: 2 * time.Hour, writes: 1, retryIn: 4 * time.Second},
				{at: 3 * time.Hour, writes: 1, retryIn: 8 * time.Second},
				{at: 4 * time.Hour, writes: 1, retryIn: 16 * time.Second},
				{at: 5 * time.Hour, writes: 1, retryIn: 32 * time.Second},
				{at: 6 * time.Hour, writes: 1, retryIn: 64 * time.Second},
				{at: 7 * time.Hour, writes: 1, retryIn: 128 * time.Second},
				{at: 8 * time.Hour, writes: 1, retryIn: 256 * time.Second},
				{at: 9 * time.Hour, writes: 1, retryIn: 5 * time.Minute},
			},
		},
		"invalid: said once, not written again until the victim changes": {
			reason: timebased.Reason,
			answer: invalid,
			attempts: []attempt{
				{at: 0, writes: 1, retryIn: 5 * time.Minute},
				{at: time.Second, held: true, retryIn: 299 * time.Second},
				// Looked at again later, unchanged: still held, and its next look is in the future.
				{at: time.Hour, held: true, retryIn: 5 * time.Minute},
				{at: time.Hour + time.Second, changeVictim: true, writes: 1, retryIn: 5 * time.Minute},
			},
			wantWarnings: 2,
		},
		"victim gone: not a refusal, tried again at once": {
			reason: timebased.Reason,
			answer: apierrors.NewNotFound(gr, victim),
			attempts: []attempt{
				{at: 0, writes: 1},
				{at: time.Millisecond, writes: 1},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := ctrllog.IntoContext(context.Background(), ctrllog.Log)
			var mu sync.Mutex
			writes := 0
			w := newIssueWorld(t, ctx, nil, "")
			cl := interceptor.NewClient(w.client.(client.WithWatch), interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					if obj.GetName() == victim {
						mu.Lock()
						writes++
						mu.Unlock()
						return tc.answer
					}
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
			})
			start := w.sc.Now
			clk := clocktesting.NewFakeClock(start)
			p := New(cl, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, w.recorder, nil, false,
				clk, nil, preemptexpectations.New(), nil)
			pre := workload.NewInfo(w.sc.Pending)
			targets := w.targets(t, map[string]string{victim: tc.reason})
			for i, a := range tc.attempts {
				clk.SetTime(start.Add(a.at))
				if a.changeVictim {
					targets[0].WorkloadInfo.Obj.ResourceVersion += "1"
				}
				mu.Lock()
				writes = 0
				mu.Unlock()
				preempted, failed, err := p.IssuePreemptions(ctx, w.cache, pre, targets, w.cq)
				got := attempt{at: a.at, changeVictim: a.changeVictim, writes: writes}
				if rf, ok := asRefused(err); ok {
					got.held = rf.HeldBack()
					got.retryIn = max(0, rf.RetryTime().Sub(clk.Now()))
				}
				if diff := cmp.Diff(a, got, cmp.AllowUnexported(attempt{})); diff != "" {
					t.Errorf("attempt %d (-want +got):\n%s", i, diff)
				}
				if preempted != 0 || failed != 1 {
					t.Errorf("attempt %d: preempted, failed = %d, %d; want 0, 1", i, preempted, failed)
				}
			}
			warnings := 0
			for _, e := range w.recorder.RecordedEvents {
				if e.Reason == EventPreemptionRefused {
					warnings++
					if e.EventType != corev1.EventTypeWarning || e.Key.Name != "pending" {
						t.Errorf("refusal event %+v: want a Warning on the preemptor", e)
					}
				}
			}
			if warnings != tc.wantWarnings {
				t.Errorf("%d PreemptionRefused events, want %d", warnings, tc.wantWarnings)
			}
		})
	}
}

// TestRefusalForgottenAfterSuccess: once a preemption goes through, an earlier refusal of the
// same preemptor does not hold the next one back.
func TestRefusalForgottenAfterSuccess(t *testing.T) {
	ctx := ctrllog.IntoContext(context.Background(), ctrllog.Log)
	w := newIssueWorld(t, ctx, nil, "")
	clk := clocktesting.NewFakeClock(w.sc.Now)
	p := New(w.client, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, w.recorder, nil, false,
		clk, nil, preemptexpectations.New(), nil)
	pre := workload.NewInfo(w.sc.Pending)
	targets := w.targets(t, map[string]string{"ran-2h30m0s": timebased.Reason})
	p.refusals.refused(pre.Obj.UID, targets, apierrors.NewInternalError(context.DeadlineExceeded), clk.Now())
	clk.Step(time.Second)
	if _, _, err := p.IssuePreemptions(ctx, w.cache, pre, targets, w.cq); err != nil {
		t.Fatalf("IssuePreemptions: %v", err)
	}
	if rf := p.refusals.held(pre.Obj.UID, targets, clk.Now()); rf != nil {
		t.Errorf("held after a successful preemption: %v", rf)
	}
}

// asRefused returns the RefusedError in err's chain, if any.
func asRefused(err error) (*RefusedError, bool) {
	var rf *RefusedError
	return rf, errors.As(err, &rf)
}
