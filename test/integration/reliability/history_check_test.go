package reliability_test

import (
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// The checks the specs rely on, fed with made-up Workload updates: each broken promise must be
// reported, and a kept one must not.
var _ = ginkgo.Describe("The history's checks", func() {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	pol := policies{
		preemptMinRuntime: map[string]time.Duration{"q": 5 * time.Second},
		reclaimMinRuntime: map[string]time.Duration{"q": 6 * time.Second},
		minAdmitDuration:  map[string]time.Duration{"q": time.Minute},
		toleration:        map[string]time.Duration{"tolerant": 8 * time.Second},
	}
	cond := func(typ string, status metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
	}
	wl := func(class string, ann map[string]string, admitted bool, conds ...metav1.Condition) *kueue.Workload {
		w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: types.UID("u"), Annotations: ann}}
		if class != "" {
			w.Spec.PriorityClassRef = &kueue.PriorityClassRef{Name: class}
		}
		if admitted {
			w.Status.Admission = &kueue.Admission{ClusterQueue: "q"}
		}
		w.Status.Conditions = conds
		return w
	}
	// run feeds an admission at t0 and a preemption with reason after ran.
	run := func(class string, ann map[string]string, reason string, ran time.Duration) []string {
		h := &history{wls: map[types.UID]*record{}, subs: map[event][]chan struct{}{}, byReason: map[string]int{}}
		reserved := []metav1.Condition{
			cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", t0),
			cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", t0),
		}
		h.observe(wl(class, ann, true, reserved...))
		h.observe(wl(class, ann, true, append(reserved, cond(kueue.WorkloadPreempted, metav1.ConditionTrue, reason, t0.Add(ran)))...))
		return h.violations(pol, nil)
	}

	ginkgo.DescribeTable("a preemption",
		func(class, reason string, ran time.Duration, broken bool) {
			ann := map[string]string{annotations.ExpectedRuntime: "3s"}
			if broken {
				gomega.Expect(run(class, ann, reason, ran)).To(gomega.HaveLen(1))
			} else {
				gomega.Expect(run(class, ann, reason, ran)).To(gomega.BeEmpty())
			}
		},
		ginkgo.Entry("in-queue inside preemptMinRuntime", "", kueue.InClusterQueueReason, 4*time.Second, true),
		ginkgo.Entry("in-queue at preemptMinRuntime", "", kueue.InClusterQueueReason, 5*time.Second, false),
		ginkgo.Entry("reclaim inside reclaimMinRuntime", "", kueue.InCohortReclamationReason, 5*time.Second, true),
		ginkgo.Entry("reclaim at reclaimMinRuntime", "", kueue.InCohortReclamationReason, 6*time.Second, false),
		ginkgo.Entry("a tolerating class inside its toleration", "tolerant", kueue.InCohortReclamationReason, 7*time.Second, true),
		ginkgo.Entry("a tolerating class after its toleration", "tolerant", kueue.InCohortReclamationReason, 8*time.Second, false),
		ginkgo.Entry("time-sharing inside minAdmitDuration", "", "InClusterQueueTimeBased", 59*time.Second, true),
		ginkgo.Entry("time-sharing after minAdmitDuration", "", "InClusterQueueTimeBased", time.Minute, false),
		ginkgo.Entry("expected runtime inside preemptMinRuntime", "", "InClusterQueueExpectedRuntime", 4*time.Second, true),
		ginkgo.Entry("an unknown reason", "", "Whatever", time.Hour, true),
	)

	ginkgo.It("reports CPU over-committed at some write, and no reservation freed or finished before the next", func() {
		h := newHistory()
		// put writes workload name at resource version rv: holding cpu, or not, or finished.
		put := func(name string, rv int, cpu string, reserved, finished bool) {
			w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: fmt.Sprint(rv)}}
			if reserved {
				w.Status.Admission = &kueue.Admission{ClusterQueue: "q", PodSetAssignments: []kueue.PodSetAssignment{{
					Name: kueue.DefaultPodSetName, ResourceUsage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
				}}}
				w.Status.Conditions = append(w.Status.Conditions, cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", t0))
			}
			if finished {
				w.Status.Conditions = append(w.Status.Conditions, cond(kueue.WorkloadFinished, metav1.ConditionTrue, "Succeeded", t0))
			}
			h.observe(w)
		}
		put("a", 10, "3", true, false)
		put("a", 11, "", false, false)
		put("b", 12, "3", true, false)
		put("b", 13, "3", true, true)
		put("c", 14, "4", true, false)
		gomega.Expect(h.violations(policies{capacity: 4000}, nil)).To(gomega.BeEmpty())
		put("d", 15, "500m", true, false)
		gomega.Expect(h.violations(policies{capacity: 4000}, nil)).To(gomega.ConsistOf(
			gomega.ContainSubstring("ns/d: over-committed at resource version 15: 4500m CPU reserved in the API, more than the 4000m there is (ns/c 4000m, ns/d 500m)"),
		))
		gomega.Expect(h.peakCommitted()).To(gomega.Equal(int64(4500)))
	})

	ginkgo.It("reports a window that moved, a half-written state and a double eviction", func() {
		h := &history{wls: map[types.UID]*record{}, subs: map[event][]chan struct{}{}, byReason: map[string]int{}}
		h.observe(wl("", nil, true, cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", t0)))
		h.observe(wl("", nil, true, cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", t0.Add(time.Second))))
		h.observe(wl("", nil, false, cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", t0.Add(time.Second))))
		v := h.violations(pol, map[string]int{"ns/w": 1})
		gomega.Expect(v).To(gomega.ConsistOf(
			gomega.ContainSubstring("QuotaReserved lastTransitionTime moved"),
			gomega.ContainSubstring("QuotaReserved=True without status.admission"),
			gomega.ContainSubstring("evicted 1 times by the managers for 0 preemptions"),
		))
	})
})
