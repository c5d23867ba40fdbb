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

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
	"github.com/kueue-timeshare/kueue-timeshare/test/performance/timesharing"
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
	// With Pods the Jobs' Pods run on simulated Nodes and terminate for their grace period.
	withPods = flag.Bool("timesharing-envtest-pods", false, "run on the local cluster with Pods (kube-controller-manager, kube-scheduler, simulated Nodes)")
	grace    = flag.Duration("timesharing-envtest-grace", 10*time.Second, "the Pods' terminationGracePeriodSeconds, with -timesharing-envtest-pods")
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
	var pods *controlplane.PodsOptions
	if *withPods {
		// Room for every queue's holder and a terminating victim beside it.
		nodes := controlplane.DefaultNodes()
		nodes.Count = 8
		pods = &controlplane.PodsOptions{Nodes: nodes, LogDir: t.TempDir()}
	}
	env, err := util.Start(util.Settings{
		Log:          log,
		FeatureGates: map[string]bool{"PriorityBoost": true},
		ConfigExtra:  fmt.Sprintf("integrations:\n  labelKeysToCopy: [%q]\n", approachLabel),
		Pods:         pods,
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
		if *withPods {
			j.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(grace.Seconds()))
		}
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

	var rows []timesharing.Row
	for n := 2; n <= *maxN; n++ {
		row := timesharing.Row{
			Case:     timesharing.Case{N: n, Window: *window, Horizon: horizon},
			Measures: map[simulator.Mode]timesharing.Measure{},
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
	if err := timesharing.WriteTable(os.Stdout, rows); err != nil {
		t.Fatal(err)
	}
	turns := rec.turns("timeshare-", *window)
	fmt.Fprintf(os.Stdout, "\nkueue-timeshare's %d completed turns: beyond minAdmitDuration %s; handover (quota released to the next admission) %s\n",
		len(turns.overrun), spread(turns.overrun), spread(turns.handover))
	if *withPods {
		fmt.Fprintf(os.Stdout, "\nWith Pods (grace %s): handover = the victim's quota released -> the next Job's Pod Running; "+
			"overlap = time two Jobs' Pods ran at once; longest Pod wait = longest time a Job had no Pod running (bound: (N-1) x window + grace + 1 s)\n\n", *grace)
		fmt.Fprintf(os.Stdout, "| N | approach | handovers | handover median | handover max | median / grace | overlap in all | longest Pod wait | bound |\n|---|---|---|---|---|---|---|---|---|\n")
		for n := 2; n <= *maxN; n++ {
			for _, a := range approaches {
				name := fmt.Sprintf("%s-%d", a.name, n)
				pm := rec.podMeasure(name, endOf[name])
				med, mx := "-", "-"
				ratio := "-"
				if len(pm.handover) > 0 {
					slices.Sort(pm.handover)
					m := pm.handover[len(pm.handover)/2]
					med, mx = m.Round(10*time.Millisecond).String(), pm.handover[len(pm.handover)-1].Round(10*time.Millisecond).String()
					ratio = fmt.Sprintf("%.2f", m.Seconds()/grace.Seconds())
				}
				bound := time.Duration(n-1)**window + *grace + time.Second
				fmt.Fprintf(os.Stdout, "| %d | %s | %d | %s | %s | %s | %s | %s | %s |\n", n, a.name, len(pm.handover), med, mx, ratio,
					pm.overlap.Round(100*time.Millisecond), pm.longestWait.Round(100*time.Millisecond), bound)
			}
		}
	}
}

// podMeasures are, for one queue, what its Jobs' Pods show.
type podMeasures struct {
	handover    []time.Duration
	overlap     time.Duration
	longestWait time.Duration
}

// podMeasure reads the queue's Workloads' quota spans and their Jobs' Pod spans up to end.
func (r *recorder) podMeasure(queue string, end time.Time) podMeasures {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out podMeasures
	type release struct {
		at  time.Time
		job string
	}
	var releases []release
	var jobs []string
	for _, h := range r.wls {
		if h.queue != queue {
			continue
		}
		job := h.job
		jobs = append(jobs, job)
		for _, s := range h.spans {
			if !s.to.IsZero() && s.to.Before(end) {
				releases = append(releases, release{at: s.to, job: job})
			}
		}
		// Longest time without a running Pod, from the Workload's arrival.
		from := h.arrived
		for _, s := range r.pods[job] {
			if s.from.After(end) {
				break
			}
			out.longestWait = max(out.longestWait, s.from.Sub(from))
			from = s.to
			if s.to.IsZero() {
				from = end
			}
		}
		out.longestWait = max(out.longestWait, end.Sub(from))
	}
	// Handover: from a release of quota to the first Pod of another Job of the queue running.
	for _, rel := range releases {
		var next time.Time
		for _, job := range jobs {
			if job == rel.job {
				continue
			}
			for _, s := range r.pods[job] {
				if !s.from.Before(rel.at) && (next.IsZero() || s.from.Before(next)) {
					next = s.from
				}
			}
		}
		if !next.IsZero() && next.Before(end) {
			out.handover = append(out.handover, next.Sub(rel.at))
		}
	}
	// Overlap: every pair of Jobs' Pod spans.
	for i, a := range jobs {
		for _, b := range jobs[i+1:] {
			for _, x := range r.pods[a] {
				for _, y := range r.pods[b] {
					from, to := later(x.from, y.from), earlier(orEnd(x.to, end), orEnd(y.to, end))
					if to.After(from) {
						out.overlap += to.Sub(from)
					}
				}
			}
		}
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func orEnd(t, end time.Time) time.Time {
	if t.IsZero() || t.After(end) {
		return end
	}
	return t
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
	// pods are, by Job (namespace/name), the times some Pod of it ran, terminating ones included.
	pods map[string][]span
	// alive are the Pods of each Job seen running now.
	alive map[string]map[string]bool
}

type history struct {
	// job is the owning Job, namespace/name.
	job     string
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
	r := &recorder{wls: map[string]*history{}, pods: map[string][]span{}, alive: map[string]map[string]bool{}}
	observe := func(obj any) {
		switch o := obj.(type) {
		case *kueue.Workload:
			r.observe(o, time.Now())
		case *corev1.Pod:
			r.observePod(o, false, time.Now())
		case toolscache.DeletedFinalStateUnknown:
			if p, ok := o.Obj.(*corev1.Pod); ok {
				r.observePod(p, true, time.Now())
			}
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				r.observePod(p, true, time.Now())
				return
			}
			observe(obj)
		},
	}
	if _, err := inf.AddEventHandler(handler); err != nil {
		return nil, err
	}
	if env.ControlPlane.Pods() {
		podInf, err := cache.GetInformer(ctx, &corev1.Pod{})
		if err != nil {
			return nil, err
		}
		if _, err := podInf.AddEventHandler(handler); err != nil {
			return nil, err
		}
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
		for _, ref := range wl.OwnerReferences {
			if ref.Kind == "Job" {
				h.job = wl.Namespace + "/" + ref.Name
			}
		}
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

// observePod keeps the spans during which some Pod of a Job runs (phase Running, terminating
// included).
func (r *recorder) observePod(p *corev1.Pod, deleted bool, now time.Time) {
	job := p.Labels["batch.kubernetes.io/job-name"]
	if job == "" {
		return
	}
	job = p.Namespace + "/" + job
	r.mu.Lock()
	defer r.mu.Unlock()
	alive := r.alive[job]
	if alive == nil {
		alive = map[string]bool{}
		r.alive[job] = alive
	}
	was := len(alive) > 0
	if !deleted && p.Status.Phase == corev1.PodRunning {
		alive[p.Name] = true
	} else {
		delete(alive, p.Name)
	}
	switch is := len(alive) > 0; {
	case is && !was:
		r.pods[job] = append(r.pods[job], span{from: now})
	case !is && was:
		r.pods[job][len(r.pods[job])-1].to = now
	}
}

// measure computes, for the LocalQueue queue's n workloads, what the simulator reports: the
// longest continuous wait (to the end for one still waiting), Jain's index over the time each
// held the quota, preemptions per hour and the workloads never admitted.
func (r *recorder) measure(queue string, n int, end time.Time) (timesharing.Measure, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ms timesharing.Measure
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
