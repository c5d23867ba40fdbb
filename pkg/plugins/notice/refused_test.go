package notice

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// TestRefusedWrites: a write the API server refuses is returned for the controller's per-item
// backoff; one that cannot succeed on retry stops the retries (a terminal error) and is said once,
// as a Warning on the Workload.
func TestRefusedWrites(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: kueue.SchemeGroupVersion.Group, Kind: "Workload"}, "wl",
		field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations"), "x", "refused by a policy")})
	cases := map[string]struct {
		answer       error
		wantTerminal bool
		wantWarnings int
	}{
		"server error: retried with backoff, nothing said": {answer: apierrors.NewInternalError(errors.New("etcd is slow"))},
		"throttled: retried with backoff":                  {answer: apierrors.NewTooManyRequests("slow down", 1)},
		"invalid: not retried, said once":                  {answer: invalid, wantTerminal: true, wantWarnings: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Notice annotations with no record behind them: the controller removes them.
			wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl", UID: "uid-wl", Annotations: map[string]string{
				annotations.PreemptionNotice:   `{"reason":"Anything","preemptor":"ns/other","preemptorUID":"u","start":"2026-01-01T00:00:00Z"}`,
				annotations.PreemptionDeadline: "2099-01-01T00:00:00Z",
			}}}
			cl := utiltesting.NewClientBuilder().WithObjects(wl).WithStatusSubresource(&kueue.Workload{}).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
					return tc.answer
				},
			}).Build()
			rec := &utiltesting.EventRecorder{}
			r := &Reconciler{Client: cl, Recorder: rec, Clock: clocktesting.NewFakeClock(wl.CreationTimestamp.Time),
				invalid: map[types.NamespacedName]string{}}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "wl"}})
			if err == nil {
				t.Fatal("Reconcile succeeded although every write was refused")
			}
			if got := errors.Is(err, reconcile.TerminalError(nil)); got != tc.wantTerminal {
				t.Errorf("terminal error: %t, want %t (%v)", got, tc.wantTerminal, err)
			}
			warnings := 0
			for _, e := range rec.RecordedEvents {
				if e.Reason == ReasonWriteRefused {
					warnings++
					if e.EventType != corev1.EventTypeWarning {
						t.Errorf("event %+v is not a Warning", e)
					}
				}
			}
			if warnings != tc.wantWarnings {
				t.Errorf("%d %s events, want %d", warnings, ReasonWriteRefused, tc.wantWarnings)
			}
		})
	}
}
