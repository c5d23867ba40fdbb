package quotatree

import (
	"testing"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
)

var cpu = resources.FlavorResource{Flavor: "default", Resource: "cpu"}

// cohortOf builds a Cohort (with nested, a child Cohort holding the last ClusterQueue) whose
// ClusterQueues have 4 CPUs of nominal quota each, with the given fair-sharing weights, and
// uses used[i] in the i-th.
func cohortOf(nested bool, weights []float64, used []int64) *Tree {
	t := &Tree{cqs: map[kueue.ClusterQueueReference]*node{}, Cohort: "root"}
	total := int64(4 * len(weights))
	root := t.newNode(nil, resources.FlavorResourceQuantities{cpu: resources.NewAmount(total)}, nil, nil)
	root.weight = 1
	t.root = root
	parent := root
	for i, w := range weights {
		if nested && i == len(weights)-1 {
			parent = t.newNode(nil, resources.FlavorResourceQuantities{cpu: resources.NewAmount(4)}, nil, root)
			parent.weight = 1
		}
		n := t.newNode(map[resources.FlavorResource]schdcache.ResourceQuota{cpu: {Nominal: resources.NewAmount(4)}},
			resources.FlavorResourceQuantities{cpu: resources.NewAmount(4)}, nil, parent)
		n.weight = w
		name := kueue.ClusterQueueReference(string(rune('a' + i)))
		t.cqs[name] = n
		t.names = append(t.names, name)
	}
	for i, u := range used {
		t.Add(t.names[i], cpu, u)
	}
	return t
}

func TestFirst(t *testing.T) {
	now := time.Unix(0, 0)
	ask := func(cq string, v int64, prio int64, queued time.Duration) Entrant {
		return Entrant{ClusterQueue: kueue.ClusterQueueReference(cq), Use: resources.FlavorResourceQuantities{cpu: resources.NewAmount(v)}, Priority: prio, QueuedAt: now.Add(queued)}
	}
	cases := map[string]struct {
		tree *Tree
		es   []Entrant
		want int
	}{
		"none": {tree: cohortOf(false, []float64{1, 1}, nil), want: -1},
		"the side that would not borrow goes first, whatever its priority and age": {
			tree: cohortOf(false, []float64{1, 1}, []int64{4, 0}),
			es:   []Entrant{ask("a", 1, 100, 0), ask("b", 1, 0, time.Hour)},
			want: 1,
		},
		"both borrow: the lower share with the head admitted": {
			tree: cohortOf(false, []float64{1, 1}, []int64{6, 4}),
			es:   []Entrant{ask("a", 1, 100, 0), ask("b", 2, 0, time.Hour)},
			want: 1,
		},
		"a larger weight lowers the share": {
			tree: cohortOf(false, []float64{4, 1}, []int64{6, 4}),
			es:   []Entrant{ask("a", 1, 0, time.Hour), ask("b", 1, 0, 0)},
			want: 0,
		},
		"equal shares: the higher priority": {
			tree: cohortOf(false, []float64{1, 1}, []int64{2, 2}),
			es:   []Entrant{ask("a", 1, 0, 0), ask("b", 1, 5, time.Hour)},
			want: 1,
		},
		"equal shares and priorities: the older": {
			tree: cohortOf(false, []float64{1, 1}, []int64{2, 2}),
			es:   []Entrant{ask("a", 1, 0, time.Hour), ask("b", 1, 0, 0)},
			want: 1,
		},
		"a child Cohort competes with its side's share, not its ClusterQueue's": {
			// c alone in its Cohort borrows nothing from it, but the Cohort borrows 3 of the root.
			tree: cohortOf(true, []float64{1, 1, 1}, []int64{5, 0, 6}),
			es:   []Entrant{ask("a", 1, 0, time.Hour), ask("c", 1, 0, 0)},
			want: 0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.tree.First(tc.es); got != tc.want {
				t.Errorf("First = %d, want %d", got, tc.want)
			}
		})
	}
}
