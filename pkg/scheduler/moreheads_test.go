package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// TestHeadsPerCycle runs one cycle with a budget of heads per ClusterQueue and reads what it
// reserved quota for, what it evicted and what the queues hold parked afterwards.
// With the rounds off, every case that expects more than the heads fails (9 of the 13).
func TestHeadsPerCycle(t *testing.T) {
	// queued is a pending workload asking for cpu, created i seconds after t0, so that queue
	// order is creation order.
	queued := func(name, cq, cpu string, i int) *testingwrappers.WorkloadWrapper {
		return testingwrappers.MakeWorkload(name, "ns").Queue(kueue.LocalQueueName(cq)).Request("cpu", cpu).
			Creation(t0.Add(time.Duration(i) * time.Second)).UID(types.UID("uid-" + name))
	}
	// many is n workloads of one cpu in cq, named cq-1...cq-n in queue order, created one a
	// second after from.
	manyFrom := func(cq string, n, from int) []*kueue.Workload {
		var wls []*kueue.Workload
		for i := 1; i <= n; i++ {
			wls = append(wls, queued(fmt.Sprintf("%s-%d", cq, i), cq, "1", from+i).Obj())
		}
		return wls
	}
	many := func(cq string, n int) []*kueue.Workload { return manyFrom(cq, n, 0) }
	cohort := []*kueue.Cohort{testingwrappers.MakeCohort("co").Obj()}
	type outcome struct {
		// Reserved are the workloads the cycle reserved quota for, by name.
		Reserved []string
		// Evicted are the running workloads it evicted.
		Evicted []string
		// Parked are the workloads the queues hold as inadmissible after it: the first that did
		// not fit, with those the queue parks along with it (same shape).
		Parked []string
	}
	cases := map[string]struct {
		objs   worldObjects
		budget int
		// parkFirst are queued, and tried by a cycle of their own, before objs' workloads.
		parkFirst []*kueue.Workload
		want      outcome
	}{
		"a budget of 1 is one head per ClusterQueue": {
			objs:   worldObjects{clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "10").Obj()}, workloads: many("cq", 5)},
			budget: 1,
			want:   outcome{Reserved: []string{"cq-1"}},
		},
		"the budget is reached": {
			objs:   worldObjects{clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "10").Obj()}, workloads: many("cq", 5)},
			budget: 3,
			want:   outcome{Reserved: []string{"cq-1", "cq-2", "cq-3"}},
		},
		"the quota runs out before the budget": {
			objs:   worldObjects{clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "3").Obj()}, workloads: many("cq", 5)},
			budget: 32,
			want:   outcome{Reserved: []string{"cq-1", "cq-2", "cq-3"}, Parked: []string{"cq-4", "cq-5"}},
		},
		"queue order is kept: the earliest created go first": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Obj()},
				workloads: []*kueue.Workload{
					queued("d", "cq", "1", 1).Obj(), queued("c", "cq", "1", 2).Obj(),
					queued("b", "cq", "1", 3).Obj(), queued("a", "cq", "1", 4).Obj(),
				},
			},
			budget: 32,
			want:   outcome{Reserved: []string{"c", "d"}, Parked: []string{"a", "b"}},
		},
		"priority comes before creation": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Obj()},
				workloads: []*kueue.Workload{
					queued("low", "cq", "1", 1).Obj(),
					queued("high", "cq", "1", 2).Priority(10).Obj(),
					queued("mid", "cq", "1", 3).Priority(5).Obj(),
				},
			},
			budget: 32,
			want:   outcome{Reserved: []string{"high", "mid"}, Parked: []string{"low"}},
		},
		"a ClusterQueue leaves the cycle at its first workload that does not fit": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "3").Obj()},
				workloads: []*kueue.Workload{
					queued("first", "cq", "1", 1).Obj(), queued("big", "cq", "3", 2).Obj(), queued("small", "cq", "1", 3).Obj(),
				},
			},
			budget: 32,
			want:   outcome{Reserved: []string{"first"}, Parked: []string{"big"}},
		},
		"StrictFIFO never admits behind a head that does not fit": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "3").QueueingStrategy(kueue.StrictFIFO).Obj()},
				workloads: []*kueue.Workload{
					queued("first", "cq", "1", 1).Obj(), queued("big", "cq", "3", 2).Obj(), queued("small", "cq", "1", 3).Obj(),
				},
			},
			budget: 32,
			want:   outcome{Reserved: []string{"first"}},
		},
		"BestEffortFIFO: a parked workload stays parked and does not end the ClusterQueue's turn": {
			objs:      worldObjects{clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "4").Obj()}, workloads: many("cq", 3)},
			parkFirst: []*kueue.Workload{queued("too-big", "cq", "5", 0).Obj()},
			budget:    32,
			want:      outcome{Reserved: []string{"cq-1", "cq-2", "cq-3"}, Parked: []string{"too-big"}},
		},
		"each ClusterQueue stops at its own quota": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("a", "2").Obj(), cpuQueue("b", "3").Obj()},
				workloads:     append(many("a", 5), many("b", 5)...),
			},
			budget: 32,
			want:   outcome{Reserved: []string{"a-1", "a-2", "b-1", "b-2", "b-3"}, Parked: []string{"a-3", "a-4", "a-5", "b-4", "b-5"}},
		},
		"borrowing stops at the borrowing limit": {
			objs: worldObjects{
				cohorts:       cohort,
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("a", "1", "1").Cohort("co").Obj(), cpuQueue("lender", "4").Cohort("co").Obj()},
				workloads:     many("a", 5),
			},
			budget: 32,
			want:   outcome{Reserved: []string{"a-1", "a-2"}, Parked: []string{"a-3", "a-4", "a-5"}},
		},
		"borrowing stops at the lender's lending limit": {
			objs: worldObjects{
				cohorts:       cohort,
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("a", "1").Cohort("co").Obj(), cpuQueue("lender", "4", "", "2").Cohort("co").Obj()},
				workloads:     many("a", 5),
			},
			budget: 32,
			want:   outcome{Reserved: []string{"a-1", "a-2", "a-3"}, Parked: []string{"a-4", "a-5"}},
		},
		"two borrowers share what the cohort has": {
			objs: worldObjects{
				cohorts: cohort,
				clusterQueues: []*kueue.ClusterQueue{
					cpuQueue("a", "0").Cohort("co").Obj(), cpuQueue("b", "0").Cohort("co").Obj(), cpuQueue("lender", "3").Cohort("co").Obj(),
				},
				// b's come after a's: equal creation times would leave the order across the two
				// ClusterQueues to chance.
				workloads: append(many("a", 5), manyFrom("b", 5, 10)...),
			},
			budget: 32,
			want:   outcome{Reserved: []string{"a-1", "a-2", "b-1"}, Parked: []string{"a-3", "a-4", "a-5"}},
		},
		"the rounds stop once a preemption is issued": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("p", "1").Preemption(lowerPriority).Obj(), cpuQueue("cq", "10").Obj()},
				workloads: append([]*kueue.Workload{
					running(queued("low", "p", "1", 0), "p"),
					queued("high", "p", "1", 1).Priority(10).Obj(),
				}, many("cq", 3)...),
			},
			budget: 32,
			want:   outcome{Reserved: []string{"cq-1", "low"}, Evicted: []string{"low"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.objs)
			s, _ := w.scheduler(WithHeadsPerCycle(tc.budget))
			if len(tc.parkFirst) > 0 {
				for _, wl := range tc.parkFirst {
					if err := w.client.Create(w.ctx, wl.DeepCopy()); err != nil {
						t.Fatal(err)
					}
				}
				// Queued alone, so that they are the heads of this cycle.
				for _, wl := range tc.objs.workloads {
					w.queues.DeleteWorkload(w.log, workload.Key(wl))
				}
				for _, wl := range tc.parkFirst {
					if err := w.queues.AddOrUpdateWorkload(w.log, wl.DeepCopy()); err != nil {
						t.Fatal(err)
					}
				}
				s.Cycle(w.ctx)
				for _, wl := range tc.objs.workloads {
					if err := w.queues.AddOrUpdateWorkload(w.log, wl.DeepCopy()); err != nil {
						t.Fatal(err)
					}
				}
			}
			s.Cycle(w.ctx)
			var got outcome
			var list kueue.WorkloadList
			if err := w.client.List(w.ctx, &list); err != nil {
				t.Fatal(err)
			}
			for i := range list.Items {
				wl := &list.Items[i]
				if workload.HasQuotaReservation(wl) {
					got.Reserved = append(got.Reserved, wl.Name)
				}
				if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) {
					got.Evicted = append(got.Evicted, wl.Name)
				}
			}
			for _, keys := range w.queues.DumpInadmissible() {
				for _, k := range keys {
					got.Parked = append(got.Parked, string(k)[len("ns/"):])
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("after one cycle (-want +got):\n%s", diff)
			}
		})
	}
}

// turnTaker is a preemptor whose SubstituteHead gives, for a head, the workload turns names, as
// the queue listed it before the cycle (the preemptor's turn order is read once per cycle).
type turnTaker struct {
	Preemptor
	turns   map[string]string
	pending map[string]*workload.Info
}

func (p turnTaker) Hooks() Hooks {
	return Hooks{SubstituteHead: func(_ context.Context, head *workload.Info, _ *schdcache.Snapshot) *workload.Info {
		if name, ok := p.turns[head.Obj.Name]; ok {
			return p.pending[name]
		}
		return nil
	}}
}

// A round's head steps aside for the workload whose turn it is, as a cycle's head does, but never
// for one the cycle already took: the turn order, read before the cycle, may still list it.
func TestMoreHeadsTakeTurns(t *testing.T) {
	cases := map[string]struct {
		turns map[string]string
		want  []string
	}{
		"no turns": {want: []string{"w-1", "w-2", "w-3"}},
		"a round's head steps aside for the workload whose turn it is": {
			turns: map[string]string{"w-2": "w-4"},
			want:  []string{"w-1", "w-3", "w-4"},
		},
		"an admitted workload is no turn to step aside for": {
			turns: map[string]string{"w-2": "w-1", "w-3": "w-1"},
			want:  []string{"w-1", "w-2", "w-3"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var wls []*kueue.Workload
			for i := 1; i <= 5; i++ {
				name := fmt.Sprintf("w-%d", i)
				wls = append(wls, cpuWorkload(name, "cq", "1").Creation(t0.Add(time.Duration(i)*time.Second)).UID(types.UID("uid-"+name)).Obj())
			}
			w := newWorld(t, worldObjects{clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "10").Obj()}, workloads: wls})
			pending := map[string]*workload.Info{}
			for _, info := range w.queues.PendingWorkloadsInfo("cq") {
				pending[info.Obj.Name] = info
			}
			s, _ := w.scheduler(WithHeadsPerCycle(3), WithPreemptor(func(c PreemptorConfig) Preemptor {
				return turnTaker{Preemptor: NewUpstreamPreemptor(c), turns: tc.turns, pending: pending}
			}))
			s.Cycle(w.ctx)
			var list kueue.WorkloadList
			if err := w.client.List(w.ctx, &list); err != nil {
				t.Fatal(err)
			}
			var got []string
			for i := range list.Items {
				if workload.HasQuotaReservation(&list.Items[i]) {
					got = append(got, list.Items[i].Name)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("reserved after one cycle (-want +got):\n%s", diff)
			}
		})
	}
}

// A head that steps aside for the workload whose turn it is hands it the standing the queue gives
// its active preemptor (the queue marks only the heads it pops): the workload goes first among the
// cycle's heads, as it would had the queue popped it.
func TestStepAsideKeepsPreemptorStanding(t *testing.T) {
	cases := map[string]struct {
		// preemptor is the workload noted as the ClusterQueue's active preemptor, "" for none.
		preemptor string
		// admitted: the turn's workload had its quota reserved after it was noted.
		admitted bool
		want     bool
	}{
		"the turn goes to the active preemptor":                     {preemptor: "w-4", want: true},
		"the turn goes to another workload":                         {preemptor: "w-5", want: false},
		"the ClusterQueue has no active preemptor":                  {want: false},
		"the preemptor was admitted since, and the queue forgot it": {preemptor: "w-4", admitted: true, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var wls []*kueue.Workload
			for i := 1; i <= 5; i++ {
				name := fmt.Sprintf("w-%d", i)
				wl := cpuWorkload(name, "cq", "1").Creation(t0.Add(time.Duration(i) * time.Second)).UID(types.UID("uid-" + name)).Obj()
				if tc.admitted && name == "w-4" {
					apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse,
						Reason: "Pending", LastTransitionTime: metav1.NewTime(t0.Add(time.Minute))})
				}
				wls = append(wls, wl)
			}
			w := newWorld(t, worldObjects{clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "10").Obj()}, workloads: wls})
			pending := map[string]*workload.Info{}
			for _, info := range w.queues.PendingWorkloadsInfo("cq") {
				// As the queue gives its heads.
				info.ClusterQueue = "cq"
				pending[info.Obj.Name] = info
			}
			s, _ := w.scheduler(WithPreemptor(func(c PreemptorConfig) Preemptor {
				return turnTaker{Preemptor: NewUpstreamPreemptor(c), turns: map[string]string{"w-2": "w-4"}, pending: pending}
			}))
			if tc.preemptor != "" {
				// As the cycle that found its targets evaluated it.
				evaluated := *pending[tc.preemptor]
				evaluated.LastEvaluatedGeneration = evaluated.Obj.Generation
				s.preemptors.requeued("cq", &evaluated, qcache.RequeueReasonPendingPreemption, t0)
			}
			heads := s.substituteHeads(w.ctx, []qcache.Head{{Info: *pending["w-2"]}}, nil, sets.New[kueue.ClusterQueueReference]())
			if got := heads[0].Obj.Name; got != "w-4" {
				t.Fatalf("head after stepping aside: %s, want w-4", got)
			}
			if got := heads[0].IsPreemptor; got != tc.want {
				t.Errorf("IsPreemptor = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestHeadCursorsNext takes heads from one ClusterQueue through its cursor, one call per step,
// each step giving the queue's heap at that time; a head returned is taken for the next steps.
func TestHeadCursorsNext(t *testing.T) {
	info := func(name string) *workload.Info {
		return workload.NewInfo(testingwrappers.MakeWorkload(name, "ns").Obj())
	}
	key := func(name string) workload.Reference { return workload.Reference("ns/" + name) }
	type outcome struct {
		// Heads are the names returned, "" for nil.
		Heads []string
		// Sorts counts the times the queue's order was taken.
		Sorts int
	}
	cases := map[string]struct {
		// orders are what the queue's order gives, one per time it is taken.
		orders [][]string
		// actives are the heap at each step.
		actives [][]string
		want    outcome
	}{
		"in queue order, one sort": {
			orders:  [][]string{{"a", "b", "c"}},
			actives: [][]string{{"c", "b", "a"}, {"c", "b"}, {"c"}, {}},
			want:    outcome{Heads: []string{"a", "b", "c", ""}, Sorts: 1},
		},
		"a parked workload is passed over and taken once back": {
			orders:  [][]string{{"a", "b", "c"}},
			actives: [][]string{{"b", "c"}, {"a", "c"}, {"c"}},
			want:    outcome{Heads: []string{"b", "a", "c"}, Sorts: 1},
		},
		"a workload gone from the heap is not taken": {
			orders:  [][]string{{"a", "b", "c"}},
			actives: [][]string{{"a", "b", "c"}, {"c"}},
			want:    outcome{Heads: []string{"a", "c"}, Sorts: 1},
		},
		"a newcomer takes the order again": {
			orders:  [][]string{{"a", "b"}, {"b", "n"}},
			actives: [][]string{{"a", "b"}, {"b", "n"}, {"n"}},
			want:    outcome{Heads: []string{"a", "b", "n"}, Sorts: 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got outcome
			pending := func(kueue.ClusterQueueReference) []*workload.Info {
				var infos []*workload.Info
				for _, n := range tc.orders[got.Sorts] {
					infos = append(infos, info(n))
				}
				got.Sorts++
				return infos
			}
			cursors := headCursors{}
			taken := sets.New[workload.Reference]()
			for _, names := range tc.actives {
				active := sets.New[workload.Reference]()
				for _, n := range names {
					active.Insert(key(n))
				}
				head := cursors.next("cq", active, taken, pending)
				if head == nil {
					got.Heads = append(got.Heads, "")
					continue
				}
				got.Heads = append(got.Heads, head.Obj.Name)
				taken.Insert(workload.Key(head.Obj))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("next (-want +got):\n%s", diff)
			}
		})
	}
}

// oneTurnTaker substitutes the turn workload for the head once, and says whether the turn
// workload could use a turn (CannotUseTurn).
type oneTurnTaker struct {
	Preemptor
	turn     *workload.Info
	cannot   bool
	substits *int
}

func (p oneTurnTaker) Hooks() Hooks {
	return Hooks{
		SubstituteHead: func(_ context.Context, head *workload.Info, _ *schdcache.Snapshot) *workload.Info {
			if *p.substits > 0 || head.Obj.UID == p.turn.Obj.UID {
				return nil
			}
			*p.substits++
			return p.turn
		},
		CannotUseTurn: func(wl *workload.Info) bool { return p.cannot && wl.Obj.UID == p.turn.Obj.UID },
	}
}

// A head that stepped aside for the workload whose turn it was gets its place back as soon as that
// workload is found unable to use the turn after all, instead of waiting parked for the next
// change in its cohort (a workload that fits waited minutes in generated scenarios); while the
// turn's workload only waits for its turn, the queue is left alone.
func TestStepAsideForOneThatCannotUseTheTurn(t *testing.T) {
	for name, tc := range map[string]struct {
		cannot bool
		// woken: the ClusterQueue's parked workloads are requeued after the cycle.
		woken bool
	}{
		"the turn's workload cannot use the turn: the queue is woken": {cannot: true, woken: true},
		"the turn's workload waits for its turn: the queue is not":    {cannot: false, woken: false},
	} {
		t.Run(name, func(t *testing.T) {
			head := cpuWorkload("head", "cq", "1").UID("uid-head").Obj()
			big := cpuWorkload("big", "cq", "3").Creation(t0.Add(time.Second)).UID("uid-big").Obj()
			w := newWorld(t, worldObjects{clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Obj()}, workloads: []*kueue.Workload{head, big}})
			pending := map[string]*workload.Info{}
			for _, info := range w.queues.PendingWorkloadsInfo("cq") {
				info.ClusterQueue = "cq"
				pending[info.Obj.Name] = info
			}
			substits := 0
			s, _ := w.scheduler(WithPreemptor(func(c PreemptorConfig) Preemptor {
				return oneTurnTaker{Preemptor: NewUpstreamPreemptor(c), turn: pending["big"], cannot: tc.cannot, substits: &substits}
			}))
			w.requeuer.ProcessRequeues(w.ctx)
			// The cycle: the queue gives its head, which steps aside and is parked, and the turn's
			// workload is refused.
			heads := w.queues.Heads(w.ctx)
			if len(heads) != 1 || heads[0].Obj.Name != "head" {
				t.Fatalf("the queue's heads: %v, want head", heads)
			}
			waited := sets.New[kueue.ClusterQueueReference]()
			heads = s.substituteHeads(w.ctx, heads, nil, waited)
			if got := heads[0].Obj.Name; got != "big" {
				t.Fatalf("head after stepping aside: %s, want big", got)
			}
			s.retryAfterTurns(waited, []entry{{Head: heads[0], status: notNominated}}, nil)
			if got := w.requeuer.ProcessRequeues(w.ctx) > 0; got != tc.woken {
				t.Errorf("queue woken: %t, want %t", got, tc.woken)
			}
		})
	}
}
