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
	store := NewStore()
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

	other := NewStore()
	if err := other.Load(context.Background(), fake.NewClientBuilder().WithScheme(scheme).WithObjects(plain.DeepCopy()).Build()); err != nil {
		t.Fatal(err)
	}
	if !other.Known("plain") {
		t.Error("not known after Load")
	}
}

// A Cohort counts as known when its object is read or when there is no object to read (a name
// ClusterQueues use); one that exists in Kueue's cache but is not read yet is unknown. Reading it
// wakes its tree; deleting it makes it a plain name again.
func TestKnownCohorts(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	team := testingwrappers.MakeCohort("team").Obj()
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(team).Build()
	store := NewStore()
	if !store.CohortKnown("team") {
		t.Error("unknown without a way to learn that the object exists")
	}
	store.SetCohortExists(CohortInCache(cl))
	var woken []kueue.CohortReference
	r := &CohortReconciler{client: cl, store: store, onChange: func(_ context.Context, c kueue.CohortReference) { woken = append(woken, c) }}
	reconcile := func(name string) {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}

	if !store.CohortKnown("named-only") {
		t.Error("a Cohort without an object is not known")
	}
	if store.CohortKnown("team") {
		t.Fatal("known before it was read")
	}
	reconcile("team")
	if !store.CohortKnown("team") {
		t.Error("not known after it was read")
	}
	reconcile("team")
	if diff := cmp.Diff([]kueue.CohortReference{"team"}, woken); diff != "" {
		t.Errorf("woken (-want +got):\n%s", diff)
	}
	if err := cl.Delete(context.Background(), team); err != nil {
		t.Fatal(err)
	}
	reconcile("team")
	if !store.CohortKnown("team") {
		t.Error("a deleted Cohort is not known")
	}
	if err := cl.Create(context.Background(), testingwrappers.MakeCohort("team").Obj()); err != nil {
		t.Fatal(err)
	}
	if store.CohortKnown("team") {
		t.Error("a re-created Cohort is known before it is read again")
	}

	other := NewStore()
	other.SetCohortExists(CohortInCache(cl))
	if err := other.Load(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	if !other.CohortKnown("team") {
		t.Error("not known after Load")
	}
}
