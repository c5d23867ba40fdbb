package notice

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy/policytest"
)

// writeNotice marks the victim (the preemptor's index lists it before the record can be read
// back), writes a record and annotations every reader honours, and refuses a second notice from
// a stale snapshot.
func TestWriteNoticeMarksTheVictim(t *testing.T) {
	ctx := context.Background()
	victim := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "uid-victim"}}
	cl := utiltesting.NewClientBuilder().WithObjects(victim.DeepCopy()).WithStatusSubresource(&kueue.Workload{}).Build()
	if err := cl.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "victim"}, victim); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	h := &policytest.Handle{At: now, Writer: cl, Indexed: true}
	n := annotations.Notice{Start: now, Deadline: now.Add(time.Minute), Reason: kueue.InClusterQueueReason, Preemptor: "ns/p", PreemptorUID: "uid-p"}
	if err := writeNotice(ctx, h, victim, n); err != nil {
		t.Fatal(err)
	}
	got, _ := h.Marked()
	if diff := cmp.Diff([]workload.Reference{"ns/victim"}, got); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	// The record and the annotations agree: every reader honours the notice as given.
	var written kueue.Workload
	if err := cl.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "victim"}, &written); err != nil {
		t.Fatal(err)
	}
	read, err := Read(&written)
	if err != nil {
		t.Fatalf("Read of the notice written: %v", err)
	}
	if diff := cmp.Diff(&n, read); diff != "" {
		t.Errorf("notice read back (-want +got):\n%s", diff)
	}
	// A second write from the same, now stale, snapshot is refused: no second notice.
	if err := writeNotice(ctx, h, victim, n); !apierrors.IsConflict(err) {
		t.Errorf("writeNotice from a stale snapshot: %v, want a conflict", err)
	}
}
