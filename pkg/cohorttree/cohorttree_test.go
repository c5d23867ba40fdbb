package cohorttree

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
)

func TestWalk(t *testing.T) {
	broken := errors.New("the API server is down")
	cases := map[string]struct {
		parents map[kueue.CohortReference]kueue.CohortReference
		first   kueue.CohortReference
		failAt  kueue.CohortReference
		want    []kueue.CohortReference
		wantErr error
	}{
		"no cohort":      {want: nil},
		"a root":         {first: "a", want: []kueue.CohortReference{"a"}},
		"up to the root": {first: "a", parents: map[kueue.CohortReference]kueue.CohortReference{"a": "b", "b": "c"}, want: []kueue.CohortReference{"a", "b", "c"}},
		"a cycle stops":  {first: "a", parents: map[kueue.CohortReference]kueue.CohortReference{"a": "b", "b": "a"}, want: []kueue.CohortReference{"a", "b"}},
		"a self-loop":    {first: "a", parents: map[kueue.CohortReference]kueue.CohortReference{"a": "a"}, want: []kueue.CohortReference{"a"}},
		"an error stops": {first: "a", failAt: "b", parents: map[kueue.CohortReference]kueue.CohortReference{"a": "b", "b": "c"}, want: []kueue.CohortReference{"a", "b"}, wantErr: broken},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Walk(tc.first, func(c kueue.CohortReference) (kueue.CohortReference, error) {
				if c == tc.failAt {
					return "", broken
				}
				return tc.parents[c], nil
			})
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWalkDepth: a chain longer than MaxDepth (a tree read mid-change) is cut, not followed.
func TestWalkDepth(t *testing.T) {
	n := 0
	got, err := Walk("c", func(c kueue.CohortReference) (kueue.CohortReference, error) {
		n++
		return kueue.CohortReference(string(c) + "c"), nil
	})
	if err != nil || len(got) != MaxDepth || n != MaxDepth {
		t.Errorf("walked %d cohorts asking %d times (error %v), want %d", len(got), n, err, MaxDepth)
	}
}

func TestRead(t *testing.T) {
	cq := func(name, cohort string) *kueue.ClusterQueue {
		return &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueue.ClusterQueueSpec{CohortName: kueue.CohortReference(cohort)}}
	}
	cohort := func(name, parent string) *kueue.Cohort {
		return &kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueue.CohortSpec{ParentName: kueue.CohortReference(parent)}}
	}
	objs := []client.Object{cq("alone", ""), cq("team", "dept"), cohort("dept", "org"), cohort("org", ""), cq("early", "not-yet")}
	cases := map[string]struct {
		cq       kueue.ClusterQueueReference
		want     []kueue.CohortReference
		wantRoot string
	}{
		"in no cohort":           {cq: "alone", wantRoot: "ClusterQueue/alone"},
		"two levels":             {cq: "team", want: []kueue.CohortReference{"dept", "org"}, wantRoot: "Cohort/org"},
		"a cohort not created":   {cq: "early", want: []kueue.CohortReference{"not-yet"}, wantRoot: "Cohort/not-yet"},
		"a ClusterQueue missing": {cq: "gone", wantRoot: "ClusterQueue/gone"},
	}
	c := utiltesting.NewClientBuilder().WithObjects(objs...).Build()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Read(context.Background(), c, tc.cq)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
			if root := Root(tc.cq, got); root != tc.wantRoot {
				t.Errorf("root %q, want %q", root, tc.wantRoot)
			}
		})
	}
	t.Run("a read error is returned", func(t *testing.T) {
		failing := utiltesting.NewClientBuilder().WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if key.Name == "org" {
					return errors.New("the API server is down")
				}
				return c.Get(ctx, key, obj, opts...)
			},
		}).Build()
		if _, err := Read(context.Background(), failing, "team"); err == nil {
			t.Error("no error")
		}
	})
}
