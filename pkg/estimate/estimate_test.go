package estimate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// classes gives the toleration of the priority class named in a workload.
type classes map[string]*toleration.Toleration

func (c classes) For(ref *kueue.PriorityClassRef) *toleration.Toleration {
	if ref == nil {
		return nil
	}
	return c[ref.Name]
}

// wl is a workload of the test: a holder when since is set (admitted that long before t0).
type wl struct {
	name     string
	cpu      int64
	prio     int64
	since    time.Duration
	expected time.Duration
	class    string
	// inG: a holder's quota is in flavor g.
	inG bool
	// drain is how long its quota stays held after an eviction for one of our reasons.
	drain time.Duration
	// queued, when set, is its queue time after t0 (a holder's is otherwise an hour before its
	// admission).
	queued time.Duration
	// ready, when set, is how long after its admission a holder's Pods were first ready.
	ready time.Duration
	// backoff, when set, is how long after t0 a pending workload's requeue backoff ends.
	backoff time.Duration
}

type queueCase struct {
	capacity   int64
	window     time.Duration
	strict     bool
	within     kueue.PreemptionPolicy
	preemptMin time.Duration
	notice     time.Duration
	handover   time.Duration
	classes    classes
	// second is the capacity of a second flavor, g, after f.
	second int64
}

func (qc queueCase) build() *Queue {
	within := qc.within
	if within == "" {
		within = kueue.PreemptionPolicyLowerOrNewerEqualPriority
	}
	settings := timebased.Settings{MinAdmitDuration: qc.window, StrictFIFO: qc.strict}
	resolved := timebased.Resolved(settings)
	minruntime.Into(resolved, minruntime.Protection{MinRuntime: qc.preemptMin})
	q := &Queue{
		Name:       "cq",
		Groups:     []Group{{Resources: []corev1.ResourceName{corev1.ResourceCPU}, Flavors: []kueue.ResourceFlavorReference{"f"}}},
		Capacity:   map[resources.FlavorResource]int64{{Flavor: "f", Resource: corev1.ResourceCPU}: qc.capacity},
		Policy:     policy.New(policy.Options{}, plugins.With(plugins.Units().Features()...)),
		Within:     within,
		StrictFIFO: qc.strict,
		Resolved:   *resolved,
		Wake: policy.WakeSettings{Queue: map[policy.Feature]any{timebased.Feature: settings}, Lengths: []time.Duration{qc.preemptMin},
			Units: plugins.Units()},
		Handover: qc.handover,
	}
	if qc.second > 0 {
		q.Groups[0].Flavors = append(q.Groups[0].Flavors, "g")
		q.Capacity[resources.FlavorResource{Flavor: "g", Resource: corev1.ResourceCPU}] = qc.second
	}
	if qc.notice > 0 {
		q.Notice = func(string) time.Duration { return qc.notice }
	}
	return q
}

func (w wl) workload() *kueue.Workload {
	obj := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: w.name}}
	if w.expected > 0 {
		obj.Annotations = map[string]string{annotations.ExpectedRuntime: w.expected.String()}
	}
	if w.class != "" {
		obj.Spec.PriorityClassRef = &kueue.PriorityClassRef{Name: w.class}
	}
	return obj
}

func (w wl) candidate(q *Queue, src policy.Sources) policy.Candidate {
	obj := w.workload()
	c := policy.Candidate{Info: &workload.Info{Obj: obj, ClusterQueue: "cq"}, Priority: w.prio, QueuedAt: t0.Add(-w.since - time.Hour)}
	if w.queued != 0 {
		c.QueuedAt = t0.Add(w.queued)
	}
	if w.since > 0 {
		c.QuotaReservedAt, c.AdmittedAt, c.Admitted = t0.Add(-w.since), t0.Add(-w.since), true
	}
	q.Wake.ReadFacts(&c, obj, src)
	return c
}

func (w wl) runtime() time.Duration {
	d, _ := plugins.Units().PromisedRuntime(w.workload())
	return d
}

func cpu(v int64) map[resources.FlavorResource]int64 {
	return map[resources.FlavorResource]int64{{Flavor: "f", Resource: corev1.ResourceCPU}: v}
}

func inputs(qc queueCase, holders, pending []wl) (*Queue, []Holder, []Waiting) {
	q := qc.build()
	src := policy.Sources{qc.classes}
	var hs []Holder
	for _, h := range holders {
		usage := cpu(h.cpu)
		if h.inG {
			usage = map[resources.FlavorResource]int64{{Flavor: "g", Resource: corev1.ResourceCPU}: h.cpu}
		}
		hd := Holder{Name: "ns/" + h.name, Usage: usage, Candidate: h.candidate(q, src), Runtime: h.runtime(), Drain: h.drain}
		if h.ready > 0 {
			hd.ReadySince = t0.Add(-h.since + h.ready)
		}
		hs = append(hs, hd)
	}
	var ws []Waiting
	for i, p := range pending {
		c := p.candidate(q, src)
		// Queued before now, in their order.
		c.QueuedAt = t0.Add(-time.Hour + time.Duration(i)*time.Second)
		ws = append(ws, Waiting{
			Name: "ns/" + p.name, Requests: map[corev1.ResourceName]int64{corev1.ResourceCPU: p.cpu},
			Pending:   &policy.Pending{Obj: c.Info.Obj, ClusterQueue: "cq", Priority: p.prio, QueuedAt: c.QueuedAt},
			Candidate: c, Runtime: p.runtime(), Drain: p.drain,
		})
		if p.backoff > 0 {
			ws[len(ws)-1].NotBefore = t0.Add(p.backoff)
		}
	}
	return q, hs, ws
}

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestCompute(t *testing.T) {
	cases := map[string]struct {
		queue   queueCase
		holders []wl
		pending []wl
		// mangle, when set, spoils the input.
		mangle func(*Queue, []Holder, []Waiting)
		want   []Estimate
	}{
		"FIFO fill: the pending workloads that fit are admitted now, in order": {
			queue:   queueCase{capacity: 4, strict: true},
			pending: []wl{{name: "a", cpu: 2}, {name: "b", cpu: 2}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: t0, Reason: "fits now"},
				{Workload: "ns/b", Position: 2, When: t0, Reason: "fits now"},
			},
		},
		"rotation: each takes a turn of the window, plus the handover": {
			queue:   queueCase{capacity: 4, window: time.Hour, handover: 2 * time.Second},
			holders: []wl{{name: "h", cpu: 4, since: 20 * time.Minute}},
			pending: []wl{{name: "a", cpu: 4}, {name: "b", cpu: 4}, {name: "c", cpu: 4}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(40*time.Minute + time.Millisecond + 2*time.Second), Reason: "when ns/h leaves"},
				// The API keeps a turn's start to the second: a's turn counts from 12:40:02.
				{Workload: "ns/b", Position: 2, When: at(100*time.Minute + time.Millisecond + 4*time.Second), Reason: "when ns/a leaves"},
				{Workload: "ns/c", Position: 3, When: at(160*time.Minute + time.Millisecond + 6*time.Second), Reason: "when ns/b leaves"},
			},
		},
		"rotation with Pods that drain: each turn's quota is free after the victim's grace period, then the handover": {
			queue:   queueCase{capacity: 4, window: time.Hour, handover: time.Second},
			holders: []wl{{name: "h", cpu: 4, since: 20 * time.Minute, drain: 10 * time.Second}},
			pending: []wl{{name: "a", cpu: 4, drain: 30 * time.Second}, {name: "b", cpu: 4}, {name: "c", cpu: 4}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(40*time.Minute + time.Millisecond + 11*time.Second), Reason: "when ns/h leaves"},
				// a's turn counts from 12:40:11 and its Pods take 30 s to go.
				{Workload: "ns/b", Position: 2, When: at(100*time.Minute + 42*time.Second + time.Millisecond), Reason: "when ns/a leaves"},
				// b drains at once; h, rotated out, waits behind c.
				{Workload: "ns/c", Position: 3, When: at(160*time.Minute + 43*time.Second + time.Millisecond), Reason: "when ns/b leaves"},
			},
		},
		"a promised end does not drain: the quota is free when the holder ends": {
			queue:   queueCase{capacity: 4, window: time.Hour, handover: time.Second},
			holders: []wl{{name: "h", cpu: 4, since: 20 * time.Minute, expected: 30 * time.Minute, drain: 10 * time.Second}},
			pending: []wl{{name: "a", cpu: 4}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(10 * time.Minute), Reason: "when ns/h leaves"},
			},
		},
		// The holder's priority is higher: a may not preempt it once its promise is past, so it
		// runs to its end.
		"a promised end counts from the Pods' first readiness when it is known, as the Job's run does": {
			queue:   queueCase{capacity: 4, window: time.Hour, handover: time.Second},
			holders: []wl{{name: "h", cpu: 4, prio: 10, since: 20 * time.Minute, expected: 30 * time.Minute, ready: 3 * time.Second}},
			pending: []wl{{name: "a", cpu: 4}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(10*time.Minute + 3*time.Second), Reason: "when ns/h leaves"},
			},
		},
		// Once offered again, a preempts b, of its priority and queued after it.
		"a workload in its requeue backoff is not offered until it ends; the one behind it fits now": {
			queue:   queueCase{capacity: 4, window: time.Hour},
			holders: []wl{{name: "h", cpu: 2, since: 10 * time.Minute}},
			pending: []wl{{name: "a", cpu: 2, backoff: 5 * time.Minute}, {name: "b", cpu: 2}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(5 * time.Minute), Reason: "when ns/b leaves"},
				{Workload: "ns/b", Position: 2, When: t0, Reason: "fits now"},
			},
		},
		"a workload whose backoff ends while quota is free is admitted then": {
			queue:   queueCase{capacity: 4, window: time.Hour},
			holders: []wl{{name: "h", cpu: 2, since: 10 * time.Minute}},
			pending: []wl{{name: "a", cpu: 2, backoff: 5 * time.Minute}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(5 * time.Minute), Reason: "when its requeue backoff ends"},
			},
		},
		"under StrictFIFO a workload in its backoff does not hold back the next": {
			queue:   queueCase{capacity: 4, window: time.Hour, strict: true},
			holders: []wl{{name: "h", cpu: 2, since: 10 * time.Minute}},
			pending: []wl{{name: "a", cpu: 4, backoff: 5 * time.Minute}, {name: "b", cpu: 2}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(50*time.Minute + time.Millisecond), Reason: "when ns/h leaves"},
				{Workload: "ns/b", Position: 2, When: t0, Reason: "fits now"},
			},
		},
		"rotation with room for two: the turns of the holders end in their order": {
			queue:   queueCase{capacity: 4, window: time.Hour},
			holders: []wl{{name: "h1", cpu: 2, since: 50 * time.Minute}, {name: "h2", cpu: 2, since: 10 * time.Minute}},
			pending: []wl{{name: "a", cpu: 2}, {name: "b", cpu: 2}, {name: "c", cpu: 2}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(10*time.Minute + time.Millisecond), Reason: "when ns/h1 leaves"},
				{Workload: "ns/b", Position: 2, When: at(50*time.Minute + time.Millisecond), Reason: "when ns/h2 leaves"},
				{Workload: "ns/c", Position: 3, When: at(70*time.Minute + time.Millisecond), Reason: "when ns/a leaves"},
			},
		},
		"only the first in line takes a turn; the one behind waits though a turn it fits in has ended": {
			queue:   queueCase{capacity: 2, window: 30 * time.Minute},
			holders: []wl{{name: "h1", cpu: 1, since: 40 * time.Minute}, {name: "h2", cpu: 1, since: 10 * time.Minute}},
			pending: []wl{{name: "a", cpu: 2}, {name: "b", cpu: 1}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(20*time.Minute + time.Millisecond), Reason: "when ns/h2 leaves"},
				{Workload: "ns/b", Position: 2, When: at(50*time.Minute + time.Millisecond), Reason: "when ns/a leaves"},
			},
		},
		"BestEffortFIFO: a lower priority takes its turn while a higher one waits for a window": {
			queue: queueCase{capacity: 4, window: time.Hour},
			holders: []wl{
				{name: "high", cpu: 2, prio: 10, since: time.Millisecond},
				{name: "low", cpu: 2, since: 30 * time.Minute},
			},
			pending: []wl{{name: "x", cpu: 4, prio: 10}, {name: "y", cpu: 2}},
			want: []Estimate{
				// x then takes both high, its window over, and y, of a lower priority.
				{Workload: "ns/x", Position: 1, When: at(time.Hour), Reason: "when ns/high leaves"},
				{Workload: "ns/y", Position: 2, When: at(30*time.Minute + time.Millisecond), Reason: "when ns/low leaves"},
			},
		},
		"victims only in the flavor taken, the first where preemption makes room": {
			queue:   queueCase{capacity: 2, second: 2, window: 30 * time.Minute},
			holders: []wl{{name: "h1", cpu: 2, since: 50 * time.Minute, inG: true}, {name: "h0", cpu: 2, since: 40 * time.Minute}},
			pending: []wl{{name: "a", cpu: 2}, {name: "b", cpu: 2}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: t0, Reason: "when ns/h0 leaves"},
				{Workload: "ns/b", Position: 2, When: t0, Reason: "when ns/h1 leaves"},
			},
		},
		"a holder queued after the one whose turn it is is preempted with the turn, and waits again from then, behind b": {
			queue: queueCase{capacity: 4, window: time.Hour},
			holders: []wl{
				{name: "old", cpu: 2, since: 50 * time.Minute},
				// Admitted while a, too big, waited: upstream preempts a newer equal priority.
				// Queued between a and b.
				{name: "newer", cpu: 2, since: 5 * time.Minute, queued: -time.Hour + 500*time.Millisecond},
			},
			pending: []wl{{name: "a", cpu: 4}, {name: "b", cpu: 4}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(10*time.Minute + time.Millisecond), Reason: "when ns/old leaves"},
				// newer waits from its eviction, behind b, which takes a's place when a's window ends.
				{Workload: "ns/b", Position: 2, When: at(70*time.Minute + time.Millisecond), Reason: "when ns/a leaves"},
			},
		},
		"BestEffortFIFO: one admitted past an older workload is preempted by it once it can fit": {
			queue:   queueCase{capacity: 4, window: time.Hour},
			holders: []wl{{name: "h", cpu: 3, since: 50 * time.Minute}},
			pending: []wl{{name: "a", cpu: 4}, {name: "b", cpu: 1}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(10*time.Minute + time.Millisecond), Reason: "when ns/h leaves"},
				{Workload: "ns/b", Position: 2, When: t0, Reason: "fits now"},
			},
		},
		"BestEffortFIFO: a higher priority's promised end does not keep the turn for one it blocks": {
			queue: queueCase{capacity: 6, window: time.Hour},
			holders: []wl{
				{name: "ends", cpu: 3, prio: 10, since: 10 * time.Minute, expected: 20 * time.Minute},
				{name: "keeps", cpu: 2, prio: 10, since: 10 * time.Minute},
			},
			pending: []wl{{name: "big", cpu: 3}, {name: "x", cpu: 1}, {name: "r", cpu: 1}},
			mangle: func(_ *Queue, _ []Holder, ws []Waiting) {
				// r was rotated out: its turn comes last, its place in the queue first.
				ws[2].Candidate.QueuedAt = t0.Add(-2 * time.Hour)
			},
			want: []Estimate{
				// Passed over until ends leaves: the preemptor sees no rule that lets it go.
				{Workload: "ns/big", Position: 1, When: at(10 * time.Minute), Reason: "when ns/ends leaves"},
				{Workload: "ns/x", Position: 2, When: t0, Reason: "fits now"},
				{Workload: "ns/r", Position: 3, When: at(time.Hour + time.Millisecond), Reason: "when ns/x leaves"},
			},
		},
		"a holder queued after the preemptor leaves as newer, not for a turn, though past its window": {
			// Seed 30111's cq1 of the drift test.
			queue: queueCase{capacity: 4, window: 30 * time.Minute, preemptMin: 45 * time.Minute},
			holders: []wl{
				{name: "w10", cpu: 3, since: 16 * time.Minute, queued: -16 * time.Minute},
				{name: "w4", cpu: 1, prio: 10, since: 13 * time.Minute, queued: -13 * time.Minute},
			},
			pending: []wl{{name: "w11", cpu: 1}, {name: "w3", cpu: 2}, {name: "w7", cpu: 1}},
			mangle: func(_ *Queue, _ []Holder, ws []Waiting) {
				// w11 was preempted by a higher priority, w3 rotated out by w10.
				ws[0].Pending.QueuedAt, ws[0].Candidate.QueuedAt = t0.Add(-65*time.Minute), t0.Add(-65*time.Minute)
				ws[1].Pending.QueuedAt, ws[1].Candidate.QueuedAt = t0.Add(-16*time.Minute), t0.Add(-115*time.Minute)
				ws[2].Pending.QueuedAt, ws[2].Candidate.QueuedAt = t0, t0
			},
			want: []Estimate{
				{Workload: "ns/w11", Position: 1, When: at(29 * time.Minute), Reason: "when ns/w10 leaves"},
				{Workload: "ns/w3", Position: 2, When: at(29 * time.Minute), Reason: "fits now"},
				// w10 waits from its eviction, behind w7, which preempts w11 once its 45m min-runtime ends.
				{Workload: "ns/w7", Position: 3, When: at(74 * time.Minute), Reason: "when ns/w11 leaves"},
			},
		},
		"one preempted by a higher priority waits again from then, behind those queued before": {
			queue: queueCase{capacity: 4, window: time.Hour},
			holders: []wl{
				{name: "n", cpu: 2, since: 5 * time.Minute, queued: -30 * time.Minute},
				{name: "v", cpu: 2, since: 3 * time.Minute, queued: -2 * time.Hour},
			},
			pending: []wl{{name: "hi", cpu: 2, prio: 10, expected: 30 * time.Minute}, {name: "x", cpu: 2}},
			mangle: func(_ *Queue, _ []Holder, ws []Waiting) {
				ws[1].Pending.QueuedAt, ws[1].Candidate.QueuedAt = t0.Add(-10*time.Minute), t0.Add(-10*time.Minute)
			},
			want: []Estimate{
				// v, the most recently admitted, leaves for hi, then takes n's place at once.
				{Workload: "ns/hi", Position: 1, When: t0, Reason: "when ns/v leaves"},
				// v waits from its eviction, behind x, which takes hi's place when it ends.
				{Workload: "ns/x", Position: 2, When: at(30 * time.Minute), Reason: "when ns/hi leaves"},
			},
		},
		"a min-runtime longer than the window holds the turn": {
			queue:   queueCase{capacity: 4, window: 10 * time.Minute, preemptMin: 30 * time.Minute},
			holders: []wl{{name: "h", cpu: 4, since: 5 * time.Minute}},
			pending: []wl{{name: "a", cpu: 4}},
			want:    []Estimate{{Workload: "ns/a", Position: 1, When: at(25 * time.Minute), Reason: "when ns/h leaves"}},
		},
		"an expected runtime ends a hold; the victim waits again by its queue time": {
			queue:   queueCase{capacity: 4, within: kueue.PreemptionPolicyLowerPriority},
			holders: []wl{{name: "h", cpu: 4, since: 5 * time.Minute, expected: 45 * time.Minute, queued: time.Minute}},
			pending: []wl{{name: "a", cpu: 4}, {name: "b", cpu: 4}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(40 * time.Minute), Reason: "when ns/h leaves"},
				{Workload: "ns/b", Position: 2, Unknown: true, Reason: "held by ns/a, which declares no runtime and has no window"},
			},
		},
		"a turn ends before a promised runtime: the holder waits again, at the back of the line": {
			queue:   queueCase{capacity: 4, window: 10 * time.Minute},
			holders: []wl{{name: "h", cpu: 4, since: 5 * time.Minute, expected: 45 * time.Minute}},
			pending: []wl{{name: "a", cpu: 4, expected: 20 * time.Minute}, {name: "b", cpu: 4}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(5*time.Minute + time.Millisecond), Reason: "when ns/h leaves"},
				{Workload: "ns/b", Position: 2, When: at(15*time.Minute + time.Millisecond), Reason: "when ns/a leaves"},
			},
		},
		"a toleration delays a lower-priority preemptor's turn": {
			queue: queueCase{capacity: 4, window: 10 * time.Minute, classes: classes{
				"tolerant": {Toleration: annotations.Toleration{MinimumPreemptablePriority: 100, Duration: time.Hour}, Source: "WorkloadPriorityClass tolerant"},
			}},
			holders: []wl{{name: "h", cpu: 4, since: 20 * time.Minute, class: "tolerant"}},
			pending: []wl{{name: "a", cpu: 4}},
			want:    []Estimate{{Workload: "ns/a", Position: 1, When: at(40 * time.Minute), Reason: "when ns/h leaves"}},
		},
		"a notice period delays the eviction": {
			queue:   queueCase{capacity: 4, window: 10 * time.Minute, notice: 5 * time.Minute},
			holders: []wl{{name: "h", cpu: 4, since: 20 * time.Minute}},
			pending: []wl{{name: "a", cpu: 4}},
			want:    []Estimate{{Workload: "ns/a", Position: 1, When: at(5 * time.Minute), Reason: "when ns/h leaves"}},
		},
		"a higher priority preempts at once, a lower one waits": {
			queue:   queueCase{capacity: 4, within: kueue.PreemptionPolicyLowerPriority},
			holders: []wl{{name: "h", cpu: 4, since: 20 * time.Minute, expected: time.Hour}},
			pending: []wl{{name: "hi", cpu: 4, prio: 10, expected: 30 * time.Minute}, {name: "lo", cpu: 4, prio: -10}},
			want: []Estimate{
				{Workload: "ns/hi", Position: 1, When: t0, Reason: "when ns/h leaves"},
				// h, rotated out, is back in line ahead of lo, and runs its hour again.
				{Workload: "ns/lo", Position: 2, When: at(90 * time.Minute), Reason: "when ns/h leaves"},
			},
		},
		"unknown: a holder with no runtime and no window": {
			queue:   queueCase{capacity: 4, strict: true},
			holders: []wl{{name: "h", cpu: 3, since: time.Minute}},
			pending: []wl{{name: "a", cpu: 2}, {name: "b", cpu: 1}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, Unknown: true, Reason: "held by ns/h, which declares no runtime and has no window"},
				{Workload: "ns/b", Position: 2, Unknown: true, Reason: "behind ns/a in turn order (held by ns/h, which declares no runtime and has no window)"},
			},
		},
		"BestEffortFIFO: a workload that fits passes one that waits": {
			queue:   queueCase{capacity: 4},
			holders: []wl{{name: "h", cpu: 3, since: time.Minute}},
			pending: []wl{{name: "a", cpu: 2}, {name: "b", cpu: 1}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, Unknown: true, Reason: "held by ns/h, which declares no runtime and has no window"},
				{Workload: "ns/b", Position: 2, When: t0, Reason: "fits now"},
			},
		},
		"too big for the ClusterQueue: unknown, and under StrictFIFO so is everyone behind": {
			queue:   queueCase{capacity: 4, strict: true, window: time.Hour},
			pending: []wl{{name: "big", cpu: 30}, {name: "a", cpu: 1}},
			want: []Estimate{
				{Workload: "ns/big", Position: 1, Unknown: true, Reason: "does not fit in ClusterQueue cq even with every workload gone"},
				{Workload: "ns/a", Position: 2, Unknown: true, Reason: "behind ns/big in turn order (does not fit in ClusterQueue cq even with every workload gone)"},
			},
		},
		"a huge expected runtime is clamped to ten years": {
			queue:   queueCase{capacity: 4, within: kueue.PreemptionPolicyLowerPriority},
			holders: []wl{{name: "h", cpu: 4, since: time.Minute, expected: 200 * 365 * 24 * time.Hour, queued: time.Minute}},
			pending: []wl{{name: "a", cpu: 4}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, When: at(Horizon - time.Minute), Reason: "when ns/h leaves"},
			},
		},
		"absurd input: no policy, negative capacity and usage, a resource nobody provides": {
			queue:   queueCase{capacity: 4, window: time.Hour},
			holders: []wl{{name: "h", cpu: 1, since: time.Minute}},
			pending: []wl{{name: "a", cpu: 1}, {name: "b", cpu: 1}},
			mangle: func(q *Queue, hs []Holder, ws []Waiting) {
				q.Policy = nil
				q.Capacity[resources.FlavorResource{Flavor: "f", Resource: corev1.ResourceMemory}] = -5
				hs[0].Usage = cpu(-3)
				ws[0].Requests[corev1.ResourceMemory] = 1
				ws[1].Pending = nil
			},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, Unknown: true, Reason: "does not fit in ClusterQueue cq even with every workload gone"},
				{Workload: "ns/b", Position: 2, When: t0, Reason: "fits now"},
			},
		},
		"no pending workloads, no capacity": {
			queue: queueCase{},
		},
		"zero capacity": {
			queue:   queueCase{capacity: 0, window: time.Hour},
			pending: []wl{{name: "a", cpu: 1}},
			want: []Estimate{
				{Workload: "ns/a", Position: 1, Unknown: true, Reason: "does not fit in ClusterQueue cq even with every workload gone"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q, hs, ws := inputs(tc.queue, tc.holders, tc.pending)
			if tc.mangle != nil {
				tc.mangle(q, hs, ws)
			}
			got := Compute(q, hs, ws, t0)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Estimate{}, "Sentence"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Compute (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSentence(t *testing.T) {
	cases := map[string]struct {
		e        Estimate
		settings timebased.Settings
		want     string
	}{
		"turns": {
			e:        Estimate{Position: 3, When: time.Date(2026, 11, 28, 14, 5, 0, 0, time.UTC)},
			settings: timebased.Settings{MinAdmitDuration: time.Hour},
			want:     "expected around 14:05, 3rd in turn order; turns are 1h",
		},
		"no turns, next day": {
			e:    Estimate{Position: 12, When: time.Date(2026, 11, 29, 14, 5, 0, 0, time.UTC)},
			want: "expected around Nov 29 14:05, 12th in turn order",
		},
		"unknown": {
			e:        Estimate{Position: 21, Unknown: true, Reason: "held by ns/h, which declares no runtime and has no window"},
			settings: timebased.Settings{MinAdmitDuration: 90 * time.Minute},
			want:     "unknown (held by ns/h, which declares no runtime and has no window), 21st in turn order; turns are 1h30m",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, sentence(&tc.e, tc.settings, t0)); diff != "" {
				t.Errorf("sentence (-want +got):\n%s", diff)
			}
		})
	}
}
