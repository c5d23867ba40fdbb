package queuesettings

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption/policy"
)

// A ClusterQueue becomes known when its object is read, with or without settings, and the queue is
// woken then (its workloads may have been refused preemption meanwhile); it is forgotten when deleted.
func TestKnownClusterQueues(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	plain := testingwrappers.MakeClusterQueue("plain").Obj()
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(plain).Build()
	store := NewStore(policy.Defaults{}, policy.ResolveLCA)
	var woken []kueue.ClusterQueueReference
	r := &Reconciler{client: cl, store: store, onChange: func(_ context.Context, cq kueue.ClusterQueueReference) { woken = append(woken, cq) }}
	reconcile := func(name string) {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}

	if store.Known("plain") {
		t.Fatal("known before it was read")
	}
	reconcile("plain")
	if !store.Known("plain") {
		t.Error("not known after it was read")
	}
	reconcile("plain")
	if diff := cmp.Diff([]kueue.ClusterQueueReference{"plain"}, woken); diff != "" {
		t.Errorf("woken (-want +got):\n%s", diff)
	}
	if err := cl.Delete(context.Background(), plain); err != nil {
		t.Fatal(err)
	}
	reconcile("plain")
	if store.Known("plain") {
		t.Error("still known after deletion")
	}

	other := NewStore(policy.Defaults{}, policy.ResolveLCA)
	if err := other.Load(context.Background(), fake.NewClientBuilder().WithScheme(scheme).WithObjects(plain.DeepCopy()).Build()); err != nil {
		t.Fatal(err)
	}
	if !other.Known("plain") {
		t.Error("not known after Load")
	}
}
