// Package timesharing_test is benchmark 2 of docs/performance.md on a real control plane: N
// same-priority workloads on a full ClusterQueue, for N = 2..10, under kueue-timeshare's
// minAdmitDuration, under upstream semantics and under upstream's kueue-priority-booster. It runs
// in real time (a window of a minute makes it about a quarter of an hour), so it only runs when
// asked: make bench-timesharing-envtest.
package timesharing_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	boostcontroller "sigs.k8s.io/kueue/cmd/experimental/kueue-priority-booster/pkg/controller"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

var (
	run    = flag.Bool("timesharing-envtest", false, "run the time-sharing benchmark on envtest (real time: about 9 windows plus 3 minutes)")
	window = flag.Duration("timesharing-envtest-window", time.Minute, "minAdmitDuration, and the priority booster's interval")
	maxN   = flag.Int("timesharing-envtest-max-n", 10, "largest N; every N from 2 up to it runs")
	logTo  = flag.String("timesharing-envtest-log", "", "write the manager's log to this file (verbosity from TEST_LOG_VERBOSITY)")
	// On a small machine, 27 queues whose windows all end in the same instant measure their own
	// contention; a cluster's queues are not synchronised.
	stagger = flag.Duration("timesharing-envtest-stagger", 2*time.Second, "delay between the starts of consecutive queues (0: all at once)")
)

// approachLabel is copied from each Job to its Workload, so that the booster acts only on its own.
const approachLabel = "kueue-timeshare.io/benchmark-approach"

// approach is one way of sharing a full queue, and the ClusterQueue preemption that gives it.
type approach struct {
	mode       simulator.Mode
	name       string
	preemption func(window time.Duration) map[string]any
}

var approaches = []approach{
	{simulator.ModeTimeshare, "timeshare", func(w time.Duration) map[string]any {
		return map[string]any{
			"withinClusterQueue":       "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": w.String()},
		}
	}},
	// Upstream semantics: the same policy without a window, which is exactly upstream's (the
	// differential tests hold our preemptor to it).
	{simulator.ModeUpstream, "upstream", func(time.Duration) map[string]any {
		return map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority"}
	}},
	// The booster lowers the priority of a workload admitted longer than its interval, which
	// only a LowerPriority queue acts on.
	{simulator.ModeBooster, "booster", func(time.Duration) map[string]any {
		return map[string]any{"withinClusterQueue": "LowerPriority"}
	}},
}

func TestTimeSharingOnEnvtest(t *testing.T) {
	if !*run {
		t.Skip("real-time benchmark; run it with make bench-timesharing-envtest")
	}
	// controller-runtime takes its logger once.
	log := logr.Discard()
	if *logTo != "" {
		f, err := os.Create(*logTo)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		log = util.SuiteLogger(f)
	} else {
		ctrl.SetLogger(log)
	}
	ctx, cancel := context.WithCancel(context.Background())
	env, err := util.Start(util.Settings{
		Log:          log,
		FeatureGates: map[string]bool{"PriorityBoost": true},
		ConfigExtra:  fmt.Sprintf("integrations:\n  labelKeysToCopy: [%q]\n", approachLabel),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer func() {
		// The booster and the recorder watch the API server: stop them first.
		cancel()
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if err := startBooster(ctx, env, *window); err != nil {
		t.Fatal(err)
	}
	rec, err := record(ctx, env)
	if err != nil {
		t.Fatal(err)
	}

	c := env.Client
	if err := c.Create(ctx, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "normal"}, Value: 100}); err != nil {
		t.Fatal(err)
	}
	type queue struct {
		a     approach
		n     int
		ns    string
		start time.Duration // after the first queue's start
	}
	var queues []queue
	for _, a := range approaches {
		ns := "bench-" + a.name
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		for n := 2; n <= *maxN; n++ {
			name := fmt.Sprintf("%s-%d", a.name, n)
			// Each ClusterQueue stands alone (no cohort) with one CPU: one workload fills it.
			if err := util.CreateClusterQueue(ctx, c, ns, name, "1", "", a.preemption(*window)); err != nil {
				t.Fatalf("ClusterQueue %s: %v", name, err)
			}
			queues = append(queues, queue{a: a, n: n, ns: ns})
		}
	}
	// Interleave the approaches, so that each is spread over the whole stagger range.
	slices.SortStableFunc(queues, func(a, b queue) int { return a.n - b.n })
	for i := range queues {
		queues[i].start = time.Duration(i) * *stagger
	}

	// The i-th workload of a queue arrives i seconds after the queue's first.
	type arrival struct {
		at time.Duration
		q  queue
		i  int
	}
	var arrivals []arrival
	for _, q := range queues {
		for i := range q.n {
			arrivals = append(arrivals, arrival{at: q.start + time.Duration(i)*time.Second, q: q, i: i})
		}
	}
	slices.SortStableFunc(arrivals, func(a, b arrival) int { return int(a.at - b.at) })
	// Long enough for the last of ten workloads to get its first turn, and a minute more.
	horizon := time.Duration(*maxN-1)**window + 2*time.Minute
	t.Logf("running each queue for %s (minAdmitDuration %s, N = 2..%d, queues started %s apart)", horizon, *window, *maxN, *stagger)
	start := time.Now()
	for _, a := range arrivals {
		time.Sleep(time.Until(start.Add(a.at)))
		j := util.CPUJob(a.q.ns, fmt.Sprintf("n%d-job-%d", a.q.n, a.i), fmt.Sprintf("%s-%d", a.q.a.name, a.q.n), "1")
		j.Labels[constants.WorkloadPriorityClassLabel] = "normal"
		j.Labels[approachLabel] = a.q.a.name
		if err := c.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	last := queues[len(queues)-1].start
	time.Sleep(time.Until(start.Add(last + horizon)))
	endOf := map[string]time.Time{}
	for _, q := range queues {
		endOf[fmt.Sprintf("%s-%d", q.a.name, q.n)] = start.Add(q.start + horizon)
	}

	var rows []simulator.TimeSharingRow
	for n := 2; n <= *maxN; n++ {
		row := simulator.TimeSharingRow{
			Case:     simulator.TimeSharingCase{N: n, Window: *window, Horizon: horizon},
			Measures: map[simulator.Mode]simulator.TimeSharingMeasure{},
		}
		for _, a := range approaches {
			name := fmt.Sprintf("%s-%d", a.name, n)
			ms, err := rec.measure(name, n, endOf[name])
			if err != nil {
				t.Fatal(err)
			}
			row.Measures[a.mode] = ms
		}
		rows = append(rows, row)
	}
	fmt.Fprintf(os.Stdout, "\nTime-sharing on envtest: minAdmitDuration (and booster interval) %s, %s of real time per queue, %d queues started %s apart\n\n",
		*window, horizon, len(queues), *stagger)
	if err := simulator.WriteTimeSharingTable(os.Stdout, rows); err != nil {
		t.Fatal(err)
	}
	turns := rec.turns("timeshare-", *window)
	fmt.Fprintf(os.Stdout, "\nkueue-timeshare's %d completed turns: beyond minAdmitDuration %s; handover (quota released to the next admission) %s\n",
		len(turns.overrun), spread(turns.overrun), spread(turns.handover))
}

// turnLatencies are, over the completed turns of a set of queues, how far each lasted past the
// window and how long the quota then stayed free.
type turnLatencies struct{ overrun, handover []time.Duration }

func (r *recorder) turns(queuePrefix string, window time.Duration) turnLatencies {
	r.mu.Lock()
	defer r.mu.Unlock()
	byQueue := map[string][]span{}
	for _, h := range r.wls {
		if strings.HasPrefix(h.queue, queuePrefix) {
			byQueue[h.queue] = append(byQueue[h.queue], h.spans...)
		}
	}
	var out turnLatencies
	for _, spans := range byQueue {
		slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
		for i, s := range spans {
			if s.to.IsZero() {
				continue
			}
			out.overrun = append(out.overrun, s.to.Sub(s.from)-window)
			if i+1 < len(spans) {
				out.handover = append(out.handover, spans[i+1].from.Sub(s.to))
			}
		}
	}
	return out
}

// spread renders durations as median and maximum.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	return fmt.Sprintf("median %s, max %s", ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}

// startBooster runs upstream's kueue-priority-booster controller next to the manager, on the
// booster approach's Workloads only.
func startBooster(ctx context.Context, env *util.Env, interval time.Duration) error {
	m, err := ctrl.NewManager(env.ControlPlane.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	r := boostcontroller.NewPriorityBoostReconciler(m.GetClient(), discardRecorder{},
		boostcontroller.WithTimeSharingInterval(interval),
		boostcontroller.WithWorkloadSelector(labels.SelectorFromSet(labels.Set{approachLabel: "booster"})))
	if err := r.SetupWithManager(m); err != nil {
		return err
	}
	go func() { _ = m.Start(ctx) }()
	return nil
}

type discardRecorder struct{}

func (discardRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {
}

// recorder notes, as the informer delivers them, when each Workload starts and stops holding
// quota and when it is preempted.
type recorder struct {
	mu  sync.Mutex
	wls map[string]*history // by namespace/name
}

type history struct {
	queue   string
	arrived time.Time
	// spans are the times it held quota: [start, end), end zero while it still does.
	spans       []span
	preemptions int
	preempted   bool
}

type span struct{ from, to time.Time }

func record(ctx context.Context, env *util.Env) (*recorder, error) {
	cache, err := ctrlcache.New(env.ControlPlane.Config, ctrlcache.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	inf, err := cache.GetInformer(ctx, &kueue.Workload{})
	if err != nil {
		return nil, err
	}
	r := &recorder{wls: map[string]*history{}}
	observe := func(obj any) {
		if wl, ok := obj.(*kueue.Workload); ok {
			r.observe(wl, time.Now())
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = cache.Start(ctx) }()
	if !cache.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the Workload informer did not sync")
	}
	return r, nil
}

func (r *recorder) observe(wl *kueue.Workload, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := wl.Namespace + "/" + wl.Name
	h := r.wls[key]
	if h == nil {
		h = &history{queue: string(wl.Spec.QueueName), arrived: now}
		r.wls[key] = h
	}
	holding := len(h.spans) > 0 && h.spans[len(h.spans)-1].to.IsZero()
	reserved := apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	switch {
	case reserved && !holding:
		h.spans = append(h.spans, span{from: now})
	case !reserved && holding:
		h.spans[len(h.spans)-1].to = now
	}
	preempted := apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadPreempted)
	if preempted && !h.preempted {
		h.preemptions++
	}
	h.preempted = preempted
}

// measure computes, for the LocalQueue queue's n workloads, what the simulator reports: the
// longest continuous wait (to the end for one still waiting), Jain's index over the time each
// held the quota, preemptions per hour and the workloads never admitted.
func (r *recorder) measure(queue string, n int, end time.Time) (simulator.TimeSharingMeasure, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ms simulator.TimeSharingMeasure
	var held []float64
	var first time.Time
	preemptions := 0
	for _, h := range r.wls {
		if h.queue != queue {
			continue
		}
		if first.IsZero() || h.arrived.Before(first) {
			first = h.arrived
		}
		waitFrom, total, admitted := h.arrived, time.Duration(0), 0
		for _, s := range h.spans {
			if !s.from.Before(end) {
				break // after this queue's horizon (queues start at different times)
			}
			admitted++
			ms.LongestWait = max(ms.LongestWait, s.from.Sub(waitFrom))
			to := s.to
			if to.IsZero() || to.After(end) {
				to = end
			}
			total += to.Sub(s.from)
			waitFrom = s.to
		}
		if admitted == 0 {
			ms.NeverAdmitted++
		}
		if !waitFrom.IsZero() {
			ms.LongestWait = max(ms.LongestWait, end.Sub(waitFrom))
		}
		held = append(held, total.Seconds())
		preemptions += h.preemptions
	}
	if len(held) != n {
		return ms, fmt.Errorf("queue %s: %d workloads seen, %d submitted", queue, len(held), n)
	}
	ms.Jain = jain(held)
	ms.PreemptionsPerHour = float64(preemptions) / end.Sub(first).Hours()
	return ms, nil
}

func jain(xs []float64) float64 {
	var sum, sumSq float64
	for _, x := range xs {
		sum += x
		sumSq += x * x
	}
	if sumSq == 0 {
		return math.NaN()
	}
	return sum * sum / (float64(len(xs)) * sumSq)
}
