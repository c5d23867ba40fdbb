package reliability_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// history records, from a watch of its own that outlives every manager, each Workload's
// reservations and preemptions as the API shows them, and any state that is half written.
type history struct {
	mu   sync.Mutex
	wls  map[types.UID]*record
	subs map[event][]chan struct{}
	// Totals of the run.
	admissions, preemptions int
	byReason                map[string]int
}

// record is one Workload's story.
type record struct {
	key           string
	job           string
	priorityClass string
	annotations   map[string]string
	reservations  []*reservation
	preemptions   []*preemption
	// windowMoves are changes of a condition's lastTransitionTime while it stayed True.
	windowMoves []string
	// halfWritten are inconsistent states seen, e.g. QuotaReserved=True without an admission.
	halfWritten []string
	preempted   bool
	evictions   int
}

// reservation is one period with QuotaReserved=True.
type reservation struct {
	clusterQueue string
	// reservedAt and admittedAt are the QuotaReserved and Admitted conditions'
	// lastTransitionTime: the clocks of minAdmitDuration and of the protections.
	reservedAt, admittedAt time.Time
	// ended is when the watch saw it end, by the test's clock; zero while it lasts.
	ended time.Time
	// cpu is what it holds, in millicores; startRV and freedRV the resource versions (the
	// API's order of writes) of the write that reserved it and of the first that released it,
	// or finished the workload (0: not yet).
	cpu              int64
	startRV, freedRV int64
}

// preemption is one transition of the Preempted condition to True.
type preemption struct {
	at      time.Time
	reason  string
	message string
	res     *reservation
}

// event is what a spec can wait for.
type event string

const (
	eventAdmission  event = "admission"
	eventPreemption event = "preemption"
)

// watchHistory starts recording the Workloads of the cluster until the spec ends.
func watchHistory(cfg *rest.Config) *history {
	ginkgo.GinkgoHelper()
	h := newHistory()
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	ginkgo.DeferCleanup(cancel)
	inf, err := c.GetInformer(ctx, &kueue.Workload{})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.observe(obj) },
		UpdateFunc: func(_, obj any) { h.observe(obj) },
	})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	go func() { _ = c.Start(ctx) }()
	gomega.Expect(c.WaitForCacheSync(ctx)).To(gomega.BeTrue())
	return h
}

func newHistory() *history {
	return &history{wls: map[types.UID]*record{}, subs: map[event][]chan struct{}{}, byReason: map[string]int{}}
}

func (h *history) observe(obj any) {
	wl, ok := obj.(*kueue.Workload)
	if !ok {
		return
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.wls[wl.UID]
	if r == nil {
		r = &record{key: wl.Namespace + "/" + wl.Name, annotations: wl.Annotations}
		if wl.Spec.PriorityClassRef != nil {
			r.priorityClass = wl.Spec.PriorityClassRef.Name
		}
		for _, o := range wl.OwnerReferences {
			if o.Kind == "Job" {
				r.job = o.Name
			}
		}
		h.wls[wl.UID] = r
	}
	if wl.Annotations[annotations.ExpectedRuntime] != "" {
		r.annotations = wl.Annotations
	}
	// Resource versions are etcd revisions: integers in the order of the writes.
	rv, _ := strconv.ParseInt(wl.ResourceVersion, 10, 64)
	half := func(format string, args ...any) {
		r.halfWritten = append(r.halfWritten, fmt.Sprintf("rv %s: ", wl.ResourceVersion)+fmt.Sprintf(format, args...))
	}
	qr := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	adm := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted)
	pre := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted)
	var cur *reservation
	if n := len(r.reservations); n > 0 && r.reservations[n-1].ended.IsZero() {
		cur = r.reservations[n-1]
	}
	if isTrue(qr) {
		if wl.Status.Admission == nil {
			half("QuotaReserved=True without status.admission")
		}
		if cur == nil {
			cur = &reservation{reservedAt: qr.LastTransitionTime.Time, startRV: rv}
			if wl.Status.Admission != nil {
				cur.clusterQueue = string(wl.Status.Admission.ClusterQueue)
				cur.cpu = cpuOf(wl.Status.Admission)
			}
			r.reservations = append(r.reservations, cur)
			h.admissions++
			h.notify(eventAdmission)
		} else if !cur.reservedAt.Equal(qr.LastTransitionTime.Time) {
			r.windowMoves = append(r.windowMoves, fmt.Sprintf("QuotaReserved lastTransitionTime moved from %s to %s while it stayed True",
				cur.reservedAt.Format(time.RFC3339), qr.LastTransitionTime.Format(time.RFC3339)))
			cur.reservedAt = qr.LastTransitionTime.Time // report each move once
		}
		if isTrue(adm) {
			switch {
			case cur.admittedAt.IsZero():
				cur.admittedAt = adm.LastTransitionTime.Time
			case !cur.admittedAt.Equal(adm.LastTransitionTime.Time):
				r.windowMoves = append(r.windowMoves, fmt.Sprintf("Admitted lastTransitionTime moved from %s to %s while it stayed True",
					cur.admittedAt.Format(time.RFC3339), adm.LastTransitionTime.Format(time.RFC3339)))
				cur.admittedAt = adm.LastTransitionTime.Time
			}
		}
	} else {
		if wl.Status.Admission != nil {
			half("status.admission set without QuotaReserved=True")
		}
		if isTrue(adm) {
			half("Admitted=True without QuotaReserved=True")
		}
	}
	if isTrue(pre) && !r.preempted {
		p := &preemption{at: pre.LastTransitionTime.Time, reason: pre.Reason, message: pre.Message, res: cur}
		if p.res == nil && len(r.reservations) > 0 {
			p.res = r.reservations[len(r.reservations)-1]
		}
		r.preemptions = append(r.preemptions, p)
		h.preemptions++
		h.byReason[pre.Reason]++
		h.notify(eventPreemption)
	}
	r.preempted = isTrue(pre)
	if cur != nil && cur.freedRV == 0 && (!isTrue(qr) || isTrue(apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished))) {
		cur.freedRV = rv
	}
	if !isTrue(qr) && cur != nil {
		cur.ended = now
	}
	if isTrue(apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)) && isTrue(qr) {
		r.evictions++
	}
}

func isTrue(c *metav1.Condition) bool { return c != nil && c.Status == metav1.ConditionTrue }

func (h *history) notify(e event) {
	for _, ch := range h.subs[e] {
		close(ch)
	}
	delete(h.subs, e)
}

// next returns a channel closed at the next event of kind e.
func (h *history) next(e event) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan struct{})
	h.subs[e] = append(h.subs[e], ch)
	return ch
}

// reservedNow lists the reservations that last at this moment.
func (h *history) reservedNow() []*reservation {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*reservation
	for _, r := range h.wls {
		if n := len(r.reservations); n > 0 && r.reservations[n-1].ended.IsZero() {
			out = append(out, r.reservations[n-1])
		}
	}
	return out
}

// lastedPast counts the reservations of rs that were still there at t (or still are).
func (h *history) lastedPast(rs []*reservation, t time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range rs {
		if r.ended.IsZero() || r.ended.After(t) {
			n++
		}
	}
	return n
}

// policies are the protections a spec configured, to check each preemption against.
type policies struct {
	// preemptMinRuntime and reclaimMinRuntime are resolved per victim ClusterQueue.
	preemptMinRuntime map[string]time.Duration
	reclaimMinRuntime map[string]time.Duration
	minAdmitDuration  map[string]time.Duration
	// toleration is how long a priority class's workloads tolerate every preemptor of the suite.
	toleration map[string]time.Duration
	// capacity is the CPU, in millicores, the ClusterQueues hold at most together (their
	// cohort's); 0 leaves it unchecked.
	capacity int64
}

// violations lists every broken promise in the history: preemptions inside a protection or
// window, windows whose start moved, half-written states, and workloads evicted more often than
// they were preempted in the API (logged, per workload, by the manager processes).
func (h *history) violations(p policies, logged map[string]int) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.wls {
		for _, m := range r.windowMoves {
			out = append(out, r.key+": "+m)
		}
		for _, m := range r.halfWritten {
			out = append(out, r.key+": half written: "+m)
		}
		if logged != nil && logged[r.key] > len(r.preemptions) {
			out = append(out, fmt.Sprintf("%s: evicted %d times by the managers for %d preemptions in the API", r.key, logged[r.key], len(r.preemptions)))
		}
		for _, pr := range r.preemptions {
			if v := pr.check(r, p); v != "" {
				out = append(out, r.key+": "+v)
			}
		}
	}
	if p.capacity > 0 {
		_, over := h.committedLocked(p.capacity)
		out = append(out, over...)
	}
	sort.Strings(out)
	return out
}

// committedLocked replays the reservations in the order of their writes: peak is the most CPU
// (millicores) held in the API at any instant, over says at which writes more than capacity was.
// The watch sees every write in order, so the sum at each write is what the API held then.
func (h *history) committedLocked(capacity int64) (peak int64, over []string) {
	type change struct {
		rv, cpu int64
		key     string
	}
	var changes []change
	for _, r := range h.wls {
		for _, res := range r.reservations {
			if res.startRV == 0 {
				continue
			}
			changes = append(changes, change{res.startRV, res.cpu, r.key})
			if res.freedRV != 0 {
				changes = append(changes, change{res.freedRV, -res.cpu, r.key})
			}
		}
	}
	// A write changes one Workload: no two changes share a resource version.
	sort.Slice(changes, func(i, j int) bool {
		if changes[i].rv != changes[j].rv {
			return changes[i].rv < changes[j].rv
		}
		return changes[i].cpu < changes[j].cpu
	})
	held := map[string]int64{}
	sum := int64(0)
	for _, c := range changes {
		sum += c.cpu
		if c.cpu > 0 {
			held[c.key] = c.cpu
		} else {
			delete(held, c.key)
		}
		peak = max(peak, sum)
		if capacity > 0 && c.cpu > 0 && sum > capacity {
			holders := make([]string, 0, len(held))
			for k, v := range held {
				holders = append(holders, fmt.Sprintf("%s %dm", k, v))
			}
			sort.Strings(holders)
			over = append(over, fmt.Sprintf("%s: over-committed at resource version %d: %dm CPU reserved in the API, more than the %dm there is (%s)",
				c.key, c.rv, sum, capacity, strings.Join(holders, ", ")))
		}
	}
	return peak, over
}

// peakCommitted is the most CPU, in millicores, reserved in the API at any instant so far.
func (h *history) peakCommitted() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	peak, _ := h.committedLocked(0)
	return peak
}

// cpuOf is the CPU, in millicores, an admission reserves.
func cpuOf(a *kueue.Admission) int64 {
	n := int64(0)
	for _, ps := range a.PodSetAssignments {
		q := ps.ResourceUsage[corev1.ResourceCPU]
		n += q.MilliValue()
	}
	return n
}

// check returns why the preemption broke a promise, or "".
func (pr *preemption) check(r *record, p policies) string {
	if pr.res == nil {
		return fmt.Sprintf("preempted (%s) at %s with no reservation seen", pr.reason, pr.at.Format(time.RFC3339))
	}
	cq := pr.res.clusterQueue
	started := pr.res.admittedAt
	if started.IsZero() {
		started = pr.res.reservedAt
	}
	ran := pr.at.Sub(started)
	need := func(what string, d time.Duration) string {
		if ran < d {
			return fmt.Sprintf("preempted (%s) after running %s, inside its %s of %s (admitted %s, preempted %s)",
				pr.reason, ran, what, d, started.Format(time.RFC3339), pr.at.Format(time.RFC3339))
		}
		return ""
	}
	if d, ok := p.toleration[r.priorityClass]; ok {
		if v := need("toleration", d); v != "" {
			return v
		}
	}
	switch {
	case pr.reason == "InClusterQueueTimeBased":
		if held := pr.at.Sub(pr.res.reservedAt); held < p.minAdmitDuration[cq] {
			return fmt.Sprintf("preempted for time-sharing after holding quota %s, inside minAdmitDuration %s", held, p.minAdmitDuration[cq])
		}
		return need("preemptMinRuntime", p.preemptMinRuntime[cq])
	case pr.reason == "InClusterQueueExpectedRuntime":
		expected, err := time.ParseDuration(r.annotations[annotations.ExpectedRuntime])
		if err != nil {
			return "preempted for its expected runtime without a valid annotation: " + err.Error()
		}
		if v := need("expected runtime", expected); v != "" {
			return v
		}
		return need("preemptMinRuntime", p.preemptMinRuntime[cq])
	case strings.HasPrefix(pr.reason, "InClusterQueue"):
		return need("preemptMinRuntime", p.preemptMinRuntime[cq])
	case strings.HasPrefix(pr.reason, "InCohort"):
		return need("reclaimMinRuntime", p.reclaimMinRuntime[cq])
	default:
		return "preempted with an unexpected reason " + pr.reason
	}
}

// summary is the run's totals, for the report.
func (h *history) summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	reasons := make([]string, 0, len(h.byReason))
	for r, n := range h.byReason {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
	}
	sort.Strings(reasons)
	return fmt.Sprintf("%d workloads, %d quota reservations, %d preemptions (%s)", len(h.wls), h.admissions, h.preemptions, strings.Join(reasons, ", "))
}

// preemptionCount is the number of preemptions seen so far.
func (h *history) preemptionCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.preemptions
}
