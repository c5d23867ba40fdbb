package manager

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
)

func TestCachedEstimates(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// read is one request: after how long since the first, for which ClusterQueue.
	type read struct {
		after time.Duration
		cq    kueue.ClusterQueueReference
		// pending is the ClusterQueue's pending list at the read (nil: unchanged, "ns/w").
		pending []string
	}
	cases := map[string]struct {
		reads       []read
		minInterval time.Duration
		// want is, per read, the computation it was served from (1 for the first).
		want []int
	}{
		"repeated reads within the TTL are served from the cache": {
			reads: []read{{0, "a", nil}, {time.Second, "a", nil}, {estimateTTL - time.Millisecond, "a", nil}},
			want:  []int{1, 1, 1},
		},
		"a read at the TTL computes again": {
			reads: []read{{0, "a", nil}, {estimateTTL, "a", nil}, {estimateTTL + time.Second, "a", nil}},
			want:  []int{1, 2, 2},
		},
		"a changed pending list computes again within the TTL": {
			reads: []read{{0, "a", nil}, {time.Second, "a", []string{"ns/w", "ns/x"}}, {2 * time.Second, "a", []string{"ns/w", "ns/x"}}, {3 * time.Second, "a", []string{"ns/x", "ns/w"}}},
			want:  []int{1, 2, 2, 3},
		},
		"a pending list changed on every read computes at most once per minimum interval": {
			minInterval: time.Second,
			reads: []read{
				{0, "a", []string{"ns/w", "ns/1"}}, {100 * time.Millisecond, "a", []string{"ns/w", "ns/2"}},
				{900 * time.Millisecond, "a", []string{"ns/w", "ns/3"}}, {time.Second, "a", []string{"ns/w", "ns/4"}},
				{1500 * time.Millisecond, "a", []string{"ns/w", "ns/5"}}, {2 * time.Second, "a", []string{"ns/w", "ns/6"}},
			},
			want: []int{1, 1, 1, 2, 2, 3},
		},
		"the minimum interval is per ClusterQueue": {
			minInterval: time.Second,
			reads:       []read{{0, "a", nil}, {100 * time.Millisecond, "b", []string{"ns/w", "ns/x"}}, {200 * time.Millisecond, "a", nil}},
			want:        []int{1, 2, 1},
		},
		"each ClusterQueue has its own entry": {
			reads: []read{{0, "a", nil}, {0, "b", nil}, {time.Second, "a", nil}, {time.Second, "b", nil}},
			want:  []int{1, 2, 1, 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			computed := 0
			pending := []string{"ns/w"}
			c := &cachedEstimates{clock: clk, ttl: estimateTTL, minInterval: tc.minInterval, pending: func(kueue.ClusterQueueReference) []*workload.Info { return infosOf(pending) }, compute: func(kueue.ClusterQueueReference, []*workload.Info, func() *schdcache.Snapshot) map[string]estimate.Estimate {
				computed++
				return map[string]estimate.Estimate{"ns/w": {Workload: "ns/w", Position: computed}}
			}}
			var got []int
			for _, r := range tc.reads {
				clk.SetTime(start.Add(r.after))
				if r.pending != nil {
					pending = r.pending
				}
				got = append(got, c.Estimates(r.cq)["ns/w"].Position)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("computations served (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCachedEstimatesMax: only the first max pending workloads are walked, and a workload joining
// behind them does not make the ClusterQueue computed again.
func TestCachedEstimatesMax(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		max     int
		pending [][]string
		// want is, per read, how many workloads the walk it was served from was given; walks
		// how many walks there were.
		want  []int
		walks int
	}{
		"under the bound, all are walked": {
			max: 3, pending: [][]string{{"ns/a", "ns/b"}}, want: []int{2}, walks: 1,
		},
		"beyond it, the first are walked, and one joining at the end changes nothing": {
			max: 2, pending: [][]string{{"ns/a", "ns/b", "ns/c"}, {"ns/a", "ns/b", "ns/c", "ns/d"}}, want: []int{2, 2}, walks: 1,
		},
		"one joining within the bound is walked": {
			max: 2, pending: [][]string{{"ns/b", "ns/c"}, {"ns/a", "ns/b", "ns/c"}}, want: []int{2, 2}, walks: 2,
		},
		"no bound": {
			pending: [][]string{{"ns/a", "ns/b", "ns/c"}}, want: []int{3}, walks: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			var pending []string
			var walks []int
			c := &cachedEstimates{clock: clk, ttl: estimateTTL, max: tc.max,
				pending: func(kueue.ClusterQueueReference) []*workload.Info { return infosOf(pending) },
				compute: func(_ kueue.ClusterQueueReference, infos []*workload.Info, _ func() *schdcache.Snapshot) map[string]estimate.Estimate {
					walks = append(walks, len(infos))
					return map[string]estimate.Estimate{"walk": {Position: len(walks)}}
				}}
			var got []int
			for _, p := range tc.pending {
				pending = p
				got = append(got, walks[c.Estimates("cq")["walk"].Position-1])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("workloads walked, per read (-want +got):\n%s", diff)
			}
			if len(walks) != tc.walks {
				t.Errorf("%d walks, want %d", len(walks), tc.walks)
			}
		})
	}
}

func TestRefreshEstimates(t *testing.T) {
	const interval = 5 * time.Second
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// step is one instant: the pending lists that changed, a visibility read, the lists that
	// changed after it, then a pass.
	type step struct {
		at        time.Duration
		pending   map[kueue.ClusterQueueReference][]string
		read      kueue.ClusterQueueReference
		afterRead map[kueue.ClusterQueueReference][]string
	}
	// pass is what one pass computed and how many snapshots it took.
	type pass struct {
		Computed  []kueue.ClusterQueueReference
		Snapshots int
	}
	cases := map[string]struct {
		steps []step
		want  []pass
	}{
		"ClusterQueues without pending workloads are passed over, without a snapshot": {
			steps: []step{{at: 0, pending: map[kueue.ClusterQueueReference][]string{"a": nil, "b": {}}}},
			want:  []pass{{}},
		},
		"every ClusterQueue with pending workloads is computed at the first pass, from one snapshot": {
			steps: []step{{at: 0, pending: map[kueue.ClusterQueueReference][]string{"a": {"ns/w"}, "b": {"ns/x"}, "c": nil}}},
			want:  []pass{{Computed: []kueue.ClusterQueueReference{"a", "b"}, Snapshots: 1}},
		},
		"an unchanged pending list is not computed again": {
			steps: []step{
				{at: 0, pending: map[kueue.ClusterQueueReference][]string{"a": {"ns/w"}}},
				{at: interval},
				{at: 10 * interval},
			},
			want: []pass{{Computed: []kueue.ClusterQueueReference{"a"}, Snapshots: 1}, {}, {}},
		},
		"a changed pending list is computed at the next pass": {
			steps: []step{
				{at: 0, pending: map[kueue.ClusterQueueReference][]string{"a": {"ns/w"}, "b": {"ns/x"}}},
				{at: interval, pending: map[kueue.ClusterQueueReference][]string{"a": {"ns/w", "ns/y"}}},
				{at: 2 * interval, pending: map[kueue.ClusterQueueReference][]string{"a": {"ns/y"}, "b": {"ns/z"}}},
			},
			want: []pass{
				{Computed: []kueue.ClusterQueueReference{"a", "b"}, Snapshots: 1},
				{Computed: []kueue.ClusterQueueReference{"a"}, Snapshots: 1},
				{Computed: []kueue.ClusterQueueReference{"a", "b"}, Snapshots: 1},
			},
		},
		"estimates a read computed since the last pass are kept": {
			steps: []step{
				{at: 0, pending: map[kueue.ClusterQueueReference][]string{"a": {"ns/w"}}},
				{at: interval, read: "a", afterRead: map[kueue.ClusterQueueReference][]string{"a": {"ns/w", "ns/y"}}},
				{at: 2 * interval, pending: map[kueue.ClusterQueueReference][]string{"a": {"ns/y"}}},
			},
			want: []pass{
				{Computed: []kueue.ClusterQueueReference{"a"}, Snapshots: 1},
				{},
				{Computed: []kueue.ClusterQueueReference{"a"}, Snapshots: 1},
			},
		},
		"a ClusterQueue that could not be computed yet is tried again at the next pass": {
			steps: []step{
				{at: 0, pending: map[kueue.ClusterQueueReference][]string{"c": {"ns/w"}}},
				{at: interval},
				{at: 2 * interval},
			},
			want: []pass{{Computed: []kueue.ClusterQueueReference{"c"}, Snapshots: 1}, {Computed: []kueue.ClusterQueueReference{"c"}, Snapshots: 1}, {Computed: []kueue.ClusterQueueReference{"c"}, Snapshots: 1}},
		},
		"a ClusterQueue whose pending list empties keeps its estimates until it has pending workloads again": {
			steps: []step{
				{at: 0, pending: map[kueue.ClusterQueueReference][]string{"a": {"ns/w"}}},
				{at: interval, pending: map[kueue.ClusterQueueReference][]string{"a": nil}},
				{at: 2 * interval, pending: map[kueue.ClusterQueueReference][]string{"a": {"ns/w"}}},
				{at: 3 * interval, pending: map[kueue.ClusterQueueReference][]string{"a": {"ns/v"}}},
			},
			want: []pass{{Computed: []kueue.ClusterQueueReference{"a"}, Snapshots: 1}, {}, {}, {Computed: []kueue.ClusterQueueReference{"a"}, Snapshots: 1}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			pending := map[kueue.ClusterQueueReference][]string{}
			snapshots := 0
			c := &cachedEstimates{clock: clk, ttl: estimateTTL,
				pending: func(cq kueue.ClusterQueueReference) []*workload.Info { return infosOf(pending[cq]) },
				compute: func(cq kueue.ClusterQueueReference, infos []*workload.Info, snap func() *schdcache.Snapshot) map[string]estimate.Estimate {
					if diff := cmp.Diff(pending[cq], keysOf(infos)); diff != "" {
						t.Errorf("%s estimated another list than its pending one (-pending +estimated):\n%s", cq, diff)
					}
					if snap != nil {
						snap()
					}
					if cq == "c" {
						return nil // as before the scheduler has built its preemptor
					}
					return map[string]estimate.Estimate{}
				}}
			var got []pass
			for _, s := range tc.steps {
				clk.SetTime(start.Add(s.at))
				for cq, list := range s.pending {
					pending[cq] = list
				}
				if s.read != "" {
					c.Estimates(s.read)
				}
				for cq, list := range s.afterRead {
					pending[cq] = list
				}
				before := snapshots
				computed := c.refreshAll([]kueue.ClusterQueueReference{"a", "b", "c"}, interval, func() *schdcache.Snapshot {
					snapshots++
					return &schdcache.Snapshot{}
				})
				got = append(got, pass{Computed: computed, Snapshots: snapshots - before})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("passes (-want +got):\n%s", diff)
			}
		})
	}
}

// infosOf is a pending list of workloads named "namespace/name".
func infosOf(names []string) []*workload.Info {
	var out []*workload.Info
	for _, n := range names {
		ns, name, _ := strings.Cut(n, "/")
		out = append(out, &workload.Info{Obj: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}})
	}
	return out
}

// TestEstimatesOfOneQueueDoNotWaitForAnother: a read of one ClusterQueue is answered while a walk
// of another is in progress (a tenant's slow queue does not hold the others' reads).
func TestEstimatesOfOneQueueDoNotWaitForAnother(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	entered, release := make(chan struct{}), make(chan struct{})
	c := &cachedEstimates{clock: clk, ttl: estimateTTL, minInterval: estimateMinInterval,
		pending: func(kueue.ClusterQueueReference) []*workload.Info { return infosOf([]string{"ns/w"}) },
		compute: func(cq kueue.ClusterQueueReference, _ []*workload.Info, _ func() *schdcache.Snapshot) map[string]estimate.Estimate {
			if cq == "slow" {
				close(entered)
				<-release
			}
			return map[string]estimate.Estimate{"ns/w": {Workload: "ns/w", Reason: string(cq)}}
		}}
	slow := make(chan string)
	go func() { slow <- c.Estimates("slow")["ns/w"].Reason }()
	<-entered
	answered := make(chan string)
	go func() { answered <- c.Estimates("other")["ns/w"].Reason }()
	select {
	case got := <-answered:
		if got != "other" {
			t.Errorf("the other ClusterQueue's read got %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read of another ClusterQueue waited for the slow walk")
	}
	close(release)
	if got := <-slow; got != "slow" {
		t.Errorf("the slow read got %q", got)
	}
}

func TestRecentSnapshot(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		// reads are the times of the reads; fail, of the takes that find no snapshot.
		reads []time.Duration
		fail  map[int]bool
		// want is, per read, the take it was served from (0: none).
		want []int
	}{
		"reads within the age share one snapshot": {
			reads: []time.Duration{0, 500 * time.Millisecond, 999 * time.Millisecond},
			want:  []int{1, 1, 1},
		},
		"a read at the age takes a new one": {
			reads: []time.Duration{0, time.Second, 1500 * time.Millisecond},
			want:  []int{1, 2, 2},
		},
		"a take that fails is not kept": {
			reads: []time.Duration{0, 100 * time.Millisecond},
			fail:  map[int]bool{1: true},
			want:  []int{0, 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			takes := 0
			byTake := map[*schdcache.Snapshot]int{}
			r := &recentSnapshot{clock: clk, maxAge: time.Second, take: func() *schdcache.Snapshot {
				takes++
				if tc.fail[takes] {
					return nil
				}
				s := &schdcache.Snapshot{}
				byTake[s] = takes
				return s
			}}
			var got []int
			for _, at := range tc.reads {
				clk.SetTime(start.Add(at))
				got = append(got, byTake[r.get()])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("takes served (-want +got):\n%s", diff)
			}
		})
	}
}
