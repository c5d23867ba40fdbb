package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

var _ = ginkgo.BeforeEach(func() {
	// One flavor for every ClusterQueue of the suite.
	var rf kueue.ResourceFlavor
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "default-flavor"}, &rf); err != nil {
		submit(context.Background(), &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}})
	}
})

var _ = ginkgo.Describe("a Job on the local cluster", func() {
	ginkgo.It("is admitted, its Pods scheduled, Running and Succeeded, the Workload Finished and its quota given to the next Job", func() {
		ctx := context.Background()
		ns := newNamespace(ctx, "basic")
		clusterQueue(ctx, ns, "basic", "4", map[string]any{"withinClusterQueue": "LowerPriority"})
		first := newJob(ns, jobSpec{name: "first", queue: "basic", cpu: "2", pods: 2, runtime: "10s", grace: 5})
		second := newJob(ns, jobSpec{name: "second", queue: "basic", cpu: "4", runtime: "5s", grace: 5})
		submit(ctx, first)
		admittedAt(ctx, first)
		submit(ctx, second)

		ginkgo.By("scheduling the first Job's two Pods to simulated Nodes, where they run")
		expectRunning(ctx, first, time.Minute)
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(holding(workload(g, ctx, second))).To(gomega.BeFalse(), "the second Job waits for the room")
			g.Expect(jobPods(ctx, second)).To(gomega.BeEmpty())
		}, 3*time.Second, interval).Should(gomega.Succeed())

		ginkgo.By("finishing the first Job's Pods after their 10 s")
		var finished time.Time
		gomega.Eventually(func(g gomega.Gomega) {
			pods := jobPods(ctx, first)
			g.Expect(pods).To(gomega.HaveLen(2))
			for _, p := range pods {
				g.Expect(p.Status.Phase).To(gomega.Equal(corev1.PodSucceeded), p.Name)
			}
			wl := workload(g, ctx, first)
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(gomega.Equal(kueue.WorkloadFinishedReasonSucceeded))
			finished = c.LastTransitionTime.Time
		}, time.Minute, interval).Should(gomega.Succeed())
		var j batchv1.Job
		gomega.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(first), &j)).To(gomega.Succeed())
		gomega.Expect(j.Status.Succeeded).To(gomega.Equal(int32(2)))

		ginkgo.By("admitting the second Job into the quota the first gave back")
		reserved, _ := admittedAt(ctx, second)
		gomega.Expect(reserved).To(gomega.BeTemporally(">=", finished.Truncate(time.Second)))
		expectRunning(ctx, second, time.Minute)

		ginkgo.By("needing no permission the chart's RBAC does not grant")
		gomega.Expect(managerLogLines("forbidden")).To(gomega.BeEmpty())
	})
})

var _ = ginkgo.Describe("a plain Pod through Kueue's pod integration", func() {
	ginkgo.It("is gated until admitted, then scheduled, run and finished", func() {
		ctx := context.Background()
		ns := newNamespace(ctx, "plain")
		clusterQueue(ctx, ns, "plain", "2", map[string]any{"withinClusterQueue": "LowerPriority"})
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "solo", Labels: map[string]string{constants.QueueLabel: "plain"},
				Annotations: map[string]string{controlplane.SimulatedRuntimeAnnotation: "5s"}},
			Spec: corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](5),
				Containers: []corev1.Container{{Name: "main", Image: "busybox",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
			},
		}
		submit(ctx, pod)
		gomega.Expect(pod.Spec.SchedulingGates).NotTo(gomega.BeEmpty(), "Kueue's webhook gates the Pod until admission")

		var wl *kueue.Workload
		gomega.Eventually(func(g gomega.Gomega) {
			var list kueue.WorkloadList
			g.Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(gomega.Succeed())
			g.Expect(list.Items).To(gomega.HaveLen(1))
			wl = &list.Items[0]
			g.Expect(wl.OwnerReferences).To(gomega.ContainElement(gomega.HaveField("Name", "solo")))
			g.Expect(apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)).To(gomega.BeTrue())
		}, time.Minute, interval).Should(gomega.Succeed())

		ginkgo.By("ungating, scheduling and running the Pod")
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(gomega.Succeed())
			g.Expect(pod.Spec.SchedulingGates).To(gomega.BeEmpty())
			g.Expect(pod.Spec.NodeName).To(gomega.HavePrefix("node-"))
			g.Expect(pod.Status.Phase).To(gomega.Equal(corev1.PodRunning))
		}, time.Minute, interval).Should(gomega.Succeed())

		ginkgo.By("finishing the Pod and its Workload")
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(gomega.Succeed())
			g.Expect(pod.Status.Phase).To(gomega.Equal(corev1.PodSucceeded))
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(wl), wl)).To(gomega.Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)).To(gomega.BeTrue())
		}, time.Minute, interval).Should(gomega.Succeed())
	})
})

var _ = ginkgo.Describe("time-sharing with Pods", func() {
	ginkgo.It("runs three same-priority Jobs in one-minute turns, and keeps the window across a manager crash", func() {
		ctx := context.Background()
		withVisibility()
		ns := newNamespace(ctx, "share")
		clusterQueue(ctx, ns, "share", "4", map[string]any{
			"withinClusterQueue":       "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "1m"},
		})
		var jobs []*batchv1.Job
		for _, name := range []string{"ada", "grace", "linus"} {
			j := newJob(ns, jobSpec{name: name, queue: "share", cpu: "4", grace: 10})
			submit(ctx, j)
			jobs = append(jobs, j)
			// Distinct creation times give the turn order.
			time.Sleep(1100 * time.Millisecond)
		}
		s := startSampler(ctx, jobs...)
		defer func() {
			if s != nil {
				s.finish()
			}
		}()
		first, second, third := jobs[0], jobs[1], jobs[2]
		admittedAt(ctx, first)
		expectRunning(ctx, first, time.Minute)
		ginkgo.By("reading the waiting Jobs' admission estimates from their LocalQueue while the first one holds its turn")
		estimates := readEstimates(ctx, "share", 0, second, third)

		ginkgo.By("handing over to the second Job after the first one's minute")
		reserved2 := time.Time{}
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workload(g, ctx, second)
			g.Expect(holding(wl)).To(gomega.BeTrue())
			reserved2 = apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved).LastTransitionTime.Time
		}, 2*time.Minute, interval).Should(gomega.Succeed())
		expectRunning(ctx, second, time.Minute)
		estimates = append(estimates, readEstimates(ctx, "share", 1, third)...)

		ginkgo.By("killing the manager 20 s into the second Job's window and restarting it 10 s later")
		time.Sleep(time.Until(reserved2.Add(20 * time.Second)))
		mgr.kill()
		time.Sleep(10 * time.Second)
		var wls kueue.WorkloadList
		gomega.Expect(k8s.List(ctx, &wls, client.InNamespace(ns))).To(gomega.Succeed())
		gomega.Expect(wls.Items).To(gomega.HaveLen(3), "no Workload lost while the manager is down")
		gomega.Expect(running(jobPods(ctx, second))).To(gomega.Equal(1), "the holder's Pod keeps running")
		freshAddresses(defaultManagerExtra)
		mgr = startManager(readyzURL)
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(holding(workload(g, ctx, second))).To(gomega.BeTrue(), "the restarted manager keeps the window")
			g.Expect(running(jobPods(ctx, second))).To(gomega.Equal(1))
		}, time.Until(reserved2.Add(58*time.Second)), time.Second).Should(gomega.Succeed())

		ginkgo.By("ending the second Job's turn when its window ends, as without the crash")
		var evicted time.Time
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workload(g, ctx, second)
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
			evicted = c.LastTransitionTime.Time
		}, 30*time.Second, 100*time.Millisecond).Should(gomega.Succeed())
		gomega.Expect(evicted).To(gomega.BeTemporally(">=", reserved2.Add(time.Minute)))
		gomega.Expect(evicted).To(gomega.BeTemporally("<", reserved2.Add(time.Minute+10*time.Second)))

		ginkgo.By("running the third Job's Pods, and the second Job's Pods terminating for their grace period")
		expectRunning(ctx, third, time.Minute)
		gomega.Eventually(func() []corev1.Pod { return jobPods(ctx, second) }, time.Minute, interval).Should(gomega.BeEmpty())
		time.Sleep(time.Second)
		shape := s
		samples := s.finish()
		s = nil

		ts := turns(samples, jobs)
		report := describeTurns(ts)
		over, peak := overcommit(samples, shape, 4000)
		report += fmt.Sprintf("overcommit (Pods of two Jobs running at once beyond the ClusterQueue's 4 CPUs): %s in all, peak %d CPUs\n",
			over.Round(100*time.Millisecond), peak/1000)
		report += fmt.Sprintf("manager log lines with update conflicts (\"the object has been modified\"), whole suite so far: %d\n",
			len(managerLogLines("the object has been modified")))
		ginkgo.GinkgoWriter.Print(report)
		ginkgo.AddReportEntry("time-sharing handovers with Pods (10 s grace)", report)
		ginkgo.By("admitting each waiting Job when its estimate said, but for the handovers' grace periods")
		compareEstimates(estimates, ts, 10*time.Second)

		holders := map[string]bool{}
		for _, t := range ts {
			holders[t.holder] = true
			gomega.Expect(t.running).NotTo(gomega.BeZero(), "the Pods of %s ran in its turn", t.holder)
		}
		gomega.Expect(holders).To(gomega.HaveLen(3), "every Job got a turn:\n%s", report)
		for i := 1; i < len(ts); i++ {
			// Both times have one-second resolution.
			gomega.Expect(ts[i].evictedPrev.Sub(ts[i-1].reserved)).To(gomega.BeNumerically(">=", time.Minute), "a turn lasts its window:\n%s", report)
		}
		ginkgo.By("handing over only once the victim's Pods are gone (HandoverAfterVictimTermination)")
		gomega.Expect(over).To(gomega.BeZero(), "no Pods beyond the ClusterQueue's quota:\n%s", report)
		for _, t := range ts[1:] {
			// The reservation time has one-second resolution; the Pods were last seen at
			// prevLastAlive, and seen gone by a read that may have come much later.
			gomega.Expect(t.reserved).To(gomega.BeTemporally(">=", t.prevLastAlive.Add(-time.Second)), "%s got the quota only after %s's Pods were gone (last seen %s):\n%s",
				t.holder, t.previous, t.prevLastAlive.Format("15:04:05.000"), report)
			gomega.Expect(t.running.Sub(t.reserved)).To(gomega.BeNumerically("<", 10*time.Second), "%s's turn is not spent waiting for %s's grace period:\n%s", t.holder, t.previous, report)
		}
	})
})

var _ = ginkgo.Describe("protection of running Pods", func() {
	ginkgo.It("keeps a lower-priority Job for its preemptMinRuntime, then hands its room over", func() {
		ctx := context.Background()
		ns := newNamespace(ctx, "minruntime")
		priorityClass(ctx, "e2e-low", 100, nil)
		priorityClass(ctx, "e2e-high", 1000, nil)
		clusterQueue(ctx, ns, "minruntime", "4", map[string]any{"withinClusterQueue": "LowerPriority", "preemptMinRuntime": "30s"})
		low := newJob(ns, jobSpec{name: "low", queue: "minruntime", cpu: "4", grace: 5, priorityClass: "e2e-low"})
		high := newJob(ns, jobSpec{name: "high", queue: "minruntime", cpu: "4", grace: 5, priorityClass: "e2e-high"})
		submit(ctx, low)
		_, admitted := admittedAt(ctx, low)
		expectRunning(ctx, low, time.Minute)
		submit(ctx, high)
		ginkgo.By("telling the waiting Job what protects the running one")
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workload(g, ctx, high)
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Message).To(gomega.ContainSubstring("preemptMinRuntime 30s"))
		}, 30*time.Second, interval).Should(gomega.Succeed())
		h := expectHandover(ctx, low, high, admitted.Add(30*time.Second), kueue.InClusterQueueReason)
		ginkgo.AddReportEntry("min-runtime handover with Pods (5 s grace)", h.String())
	})

	ginkgo.It("lets a tolerating priority class keep its Pods for toleration-seconds, then hands its room over", func() {
		ctx := context.Background()
		ns := newNamespace(ctx, "toleration")
		priorityClass(ctx, "e2e-tolerant", 100, map[string]string{
			"preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "10000",
			"preemption-toleration.scheduling.x-k8s.io/toleration-seconds":           "25",
		})
		priorityClass(ctx, "e2e-urgent", 1000, nil)
		clusterQueue(ctx, ns, "toleration", "4", map[string]any{"withinClusterQueue": "LowerPriority"})
		low := newJob(ns, jobSpec{name: "tolerant", queue: "toleration", cpu: "4", grace: 5, priorityClass: "e2e-tolerant"})
		high := newJob(ns, jobSpec{name: "urgent", queue: "toleration", cpu: "4", grace: 5, priorityClass: "e2e-urgent"})
		submit(ctx, low)
		_, admitted := admittedAt(ctx, low)
		expectRunning(ctx, low, time.Minute)
		submit(ctx, high)
		h := expectHandover(ctx, low, high, admitted.Add(25*time.Second), kueue.InClusterQueueReason)
		ginkgo.AddReportEntry("toleration handover with Pods (5 s grace)", h.String())
	})

	ginkgo.It("requeues a Job past its expected runtime for a waiting one of the same priority", func() {
		ctx := context.Background()
		ns := newNamespace(ctx, "expected")
		clusterQueue(ctx, ns, "expected", "4", map[string]any{"withinClusterQueue": "LowerPriority"})
		long := newJob(ns, jobSpec{name: "sweep", queue: "expected", cpu: "4", grace: 5, annotations: map[string]string{
			"kueue-timeshare.io/expected-runtime": "25s", "kueue-timeshare.io/requeue-delay": "5m",
		}})
		next := newJob(ns, jobSpec{name: "next", queue: "expected", cpu: "4", grace: 5})
		submit(ctx, long)
		_, admitted := admittedAt(ctx, long)
		expectRunning(ctx, long, time.Minute)
		submit(ctx, next)
		h := expectHandover(ctx, long, next, admitted.Add(25*time.Second), tsapi.ExpectedRuntimeReason)
		ginkgo.AddReportEntry("expected-runtime handover with Pods (5 s grace)", h.String())
		ginkgo.By("requeueing the Job, which waits for its turn")
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workload(g, ctx, long)
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadRequeued)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(gomega.Equal(tsapi.ExpectedRuntimeReason))
			g.Expect(holding(wl)).To(gomega.BeFalse())
		}, 30*time.Second, interval).Should(gomega.Succeed())
	})
})

var _ = ginkgo.Describe("a preemption notice with Pods", func() {
	ginkgo.It("tells the victim's running Pods the deadline and deletes them only after it", func() {
		ctx := context.Background()
		ns := newNamespace(ctx, "notice")
		priorityClass(ctx, "e2e-notice-low", 100, nil)
		priorityClass(ctx, "e2e-notice-high", 1000, nil)
		clusterQueue(ctx, ns, "notice", "4", map[string]any{
			"withinClusterQueue": "LowerPriority", "noticePeriod": "20s", "noticeOnPriorityPreemption": true})
		low := newJob(ns, jobSpec{name: "low", queue: "notice", cpu: "4", grace: 5, priorityClass: "e2e-notice-low"})
		high := newJob(ns, jobSpec{name: "high", queue: "notice", cpu: "4", grace: 5, priorityClass: "e2e-notice-high"})
		submit(ctx, low)
		expectRunning(ctx, low, time.Minute)
		submit(ctx, high)

		ginkgo.By("annotating the victim's running Pods with the deadline")
		var deadline time.Time
		gomega.Eventually(func(g gomega.Gomega) {
			pods := jobPods(ctx, low)
			g.Expect(pods).NotTo(gomega.BeEmpty())
			for _, p := range pods {
				d, err := time.Parse(time.RFC3339, p.Annotations[annotations.PreemptionDeadline])
				g.Expect(err).NotTo(gomega.HaveOccurred(), "Pod %s carries the deadline", p.Name)
				deadline = d
			}
		}, 30*time.Second, interval).Should(gomega.Succeed())
		gomega.Expect(time.Until(deadline)).To(gomega.BeNumerically(">", 10*time.Second), "the notice lasts its 20 s")

		h := expectHandover(ctx, low, high, deadline, kueue.InClusterQueueReason)
		gomega.Expect(h.evicted).To(gomega.BeTemporally(">=", deadline), "evicted at the deadline, not before")
		gomega.Eventually(func(g gomega.Gomega) {
			c := apimeta.FindStatusCondition(workload(g, ctx, low).Status.Conditions, notice.Condition)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Reason).To(gomega.Equal(string(notice.EvictedAtDeadline)))
		}, 30*time.Second, interval).Should(gomega.Succeed())
		ginkgo.AddReportEntry("notice handover with Pods (20 s notice, 5 s grace)", h.String())
	})
})

var _ = ginkgo.Describe("waitForPodsReady", func() {
	ginkgo.It("evicts a Job whose Pods never become Ready after the timeout and admits the next one", func() {
		ctx := context.Background()
		ns := newNamespace(ctx, "podsready")
		clusterQueue(ctx, ns, "podsready", "4", map[string]any{"withinClusterQueue": "LowerPriority"})
		stuck := newJob(ns, jobSpec{name: "stuck", queue: "podsready", cpu: "4", grace: 5, readyAfter: "1h"})
		next := newJob(ns, jobSpec{name: "next", queue: "podsready", cpu: "4", grace: 5})
		submit(ctx, stuck)
		_, admitted := admittedAt(ctx, stuck)
		gomega.Eventually(func(g gomega.Gomega) {
			pods := jobPods(ctx, stuck)
			g.Expect(pods).To(gomega.HaveLen(1))
			g.Expect(pods[0].Status.Phase).To(gomega.Equal(corev1.PodRunning))
		}, time.Minute, interval).Should(gomega.Succeed())
		submit(ctx, next)
		h := expectHandover(ctx, stuck, next, admitted.Add(podsReadyTimeout), kueue.WorkloadEvictedByPodsReadyTimeout)
		ginkgo.AddReportEntry("waitForPodsReady handover with Pods (5 s grace)", h.String())
	})
})

// A Job whose Pods take 60 s to become Ready, protected by a 20 s preemptMinRuntime, under each
// runtime clock: what the admin gets from timeshare.runtimeClock.
var _ = ginkgo.Describe("the runtime clock with Pods slow to become Ready", ginkgo.Ordered, func() {
	const readyAfter, minRuntime = 60 * time.Second, 20 * time.Second
	ginkgo.BeforeAll(func() {
		priorityClass(context.Background(), "e2e-clock-low", 100, nil)
		priorityClass(context.Background(), "e2e-clock-high", 1000, nil)
	})
	ginkgo.AfterAll(func() {
		reconfigureManager(defaultManagerExtra)
	})

	podsReadyClock := func(clock string) string {
		return fmt.Sprintf(`integrations:
  frameworks: ["batch/job"]
waitForPodsReady:
  timeout: 3m
  blockAdmission: false
timeshare:
  runtimeClock: %s
`, clock)
	}

	// run starts a slow Job and, once it holds quota, a higher-priority Job for its room; it
	// returns the slow Job's Workload conditions' times once the higher one took over.
	run := func(ctx context.Context, clock string) (admitted, ready time.Time, h handover) {
		ginkgo.GinkgoHelper()
		ginkgo.By("restarting the manager with runtimeClock " + clock + " and a waitForPodsReady timeout longer than the Pods take")
		reconfigureManager(podsReadyClock(clock))
		ns := newNamespace(ctx, "clock-"+strings.ToLower(clock))
		clusterQueue(ctx, ns, ns, "4", map[string]any{"withinClusterQueue": "LowerPriority", "preemptMinRuntime": minRuntime.String()})
		slow := newJob(ns, jobSpec{name: "slow-start", queue: ns, cpu: "4", grace: 5, readyAfter: readyAfter.String(), priorityClass: "e2e-clock-low"})
		urgent := newJob(ns, jobSpec{name: "urgent", queue: ns, cpu: "4", grace: 5, priorityClass: "e2e-clock-high"})
		submit(ctx, slow)
		_, admitted = admittedAt(ctx, slow)
		expectRunning(ctx, slow, time.Minute)
		submit(ctx, urgent)
		notBefore := admitted.Add(minRuntime)
		if clock == string(policy.RuntimeClockPodsReady) {
			ginkgo.By("counting the min-runtime from the moment Kueue saw the Pods Ready")
			gomega.Eventually(func(g gomega.Gomega) {
				c := apimeta.FindStatusCondition(workload(g, ctx, slow).Status.Conditions, kueue.WorkloadPodsReady)
				g.Expect(c).NotTo(gomega.BeNil())
				g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
				ready = c.LastTransitionTime.Time
			}, readyAfter+time.Minute, interval).Should(gomega.Succeed())
			gomega.Expect(ready.Sub(admitted)).To(gomega.BeNumerically(">=", readyAfter-time.Second), "the Pods took their 60 s")
			notBefore = ready.Add(minRuntime)
		}
		h = expectHandover(ctx, slow, urgent, notBefore, kueue.InClusterQueueReason)
		if ready.IsZero() {
			wl := workload(gomega.Default, ctx, slow)
			if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady); c != nil && c.Status == metav1.ConditionTrue {
				ready = c.LastTransitionTime.Time
			}
		}
		return admitted, ready, h
	}

	ginkgo.It("Admitted: the min-runtime runs out while the Pods are still starting, so the Job is preempted before it ran Ready", func() {
		ctx := context.Background()
		admitted, ready, h := run(ctx, string(policy.RuntimeClockAdmitted))
		gomega.Expect(ready.IsZero()).To(gomega.BeTrue(), "the Job was preempted before its Pods were Ready")
		gomega.Expect(h.evicted.Sub(admitted)).To(gomega.BeNumerically("<", readyAfter))
		ginkgo.AddReportEntry("runtimeClock Admitted, Pods Ready after 60 s, preemptMinRuntime 20 s",
			fmt.Sprintf("preempted %s after admission, 0 s after its Pods were Ready (they never were)", h.evicted.Sub(admitted)))
	})

	ginkgo.It("PodsReady: the min-runtime counts from Ready, so the Job runs Ready for its 20 s before it is preempted", func() {
		ctx := context.Background()
		admitted, ready, h := run(ctx, string(policy.RuntimeClockPodsReady))
		gomega.Expect(h.evicted.Sub(ready)).To(gomega.BeNumerically(">=", minRuntime-time.Second))
		ginkgo.AddReportEntry("runtimeClock PodsReady, Pods Ready after 60 s, preemptMinRuntime 20 s",
			fmt.Sprintf("preempted %s after admission, %s after its Pods were Ready", h.evicted.Sub(admitted), h.evicted.Sub(ready)))
	})

	// The tenant's readiness probe fails for 2 s every 8 s: Kueue's PodsReady goes False and True
	// again and again, and would restart a clock counted from its last transition. Protection is
	// bought once per admission, from the first Ready since the quota was reserved.
	ginkgo.It("PodsReady with a probe that fails now and then: the min-runtime counts from the first Ready, so flapping buys no protection", func() {
		ctx := context.Background()
		reconfigureManager(podsReadyClock(string(policy.RuntimeClockPodsReady)))
		ns := newNamespace(ctx, "clock-flapping")
		clusterQueue(ctx, ns, ns, "4", map[string]any{"withinClusterQueue": "LowerPriority", "preemptMinRuntime": minRuntime.String()})
		flapping := newJob(ns, jobSpec{name: "flapping", queue: ns, cpu: "4", grace: 5, unreadyEvery: "8s", priorityClass: "e2e-clock-low"})
		urgent := newJob(ns, jobSpec{name: "urgent", queue: ns, cpu: "4", grace: 5, priorityClass: "e2e-clock-high"})
		submit(ctx, flapping)
		expectRunning(ctx, flapping, time.Minute)
		first := readyAt(ctx, flapping)
		submit(ctx, urgent)
		ginkgo.By("seeing Kueue's PodsReady flap: False, then True again after the first Ready")
		var flaps int
		var last metav1.ConditionStatus = metav1.ConditionTrue
		gomega.Eventually(func(g gomega.Gomega) {
			c := apimeta.FindStatusCondition(workload(g, ctx, flapping).Status.Conditions, kueue.WorkloadPodsReady)
			g.Expect(c).NotTo(gomega.BeNil())
			if c.Status != last {
				flaps++
				last = c.Status
			}
			g.Expect(flaps).To(gomega.BeNumerically(">=", 2))
		}, minRuntime, 200*time.Millisecond).Should(gomega.Succeed())
		h := expectHandover(ctx, flapping, urgent, first.Add(minRuntime), kueue.InClusterQueueReason)
		gomega.Expect(h.evicted.Sub(first)).To(gomega.BeNumerically("<", minRuntime+10*time.Second), "preempted once 20 s have passed since the first Ready")
		ginkgo.AddReportEntry("runtimeClock PodsReady, readiness failing 2 s every 8 s, preemptMinRuntime 20 s",
			fmt.Sprintf("preempted %s after the first Ready; PodsReady changed %d times before", h.evicted.Sub(first), flaps))
	})
})
