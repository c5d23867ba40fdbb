package reliability_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// queueSetup is a ClusterQueue of the suite's cohort.
type queueSetup struct {
	name       string
	cpu        int64
	preemption map[string]any
}

// The settings every policy needs, short enough to expire during a run. minAdmitDuration cannot
// be under a minute; the long form runs long enough to see time-based preemptions.
const (
	cohortName        = "reliability"
	reclaimMinRuntime = 6 * time.Second
	tsPreemptMin      = 4 * time.Second
	prioPreemptMin    = 5 * time.Second
	minAdmitDuration  = time.Minute
	expectedRuntime   = 3 * time.Second
)

// allPolicies creates, in ns, the cohort and ClusterQueues (and LocalQueues) with every policy on:
// "ts" shares by time (minAdmitDuration) with preemptMinRuntime, "prio" preempts lower priorities
// with preemptMinRuntime, both borrow from each other and reclaim under the cohort's
// reclaimMinRuntime; the tolerant priority class and the expected-runtime annotations of the Jobs
// do the rest. It returns the protections (and the cohort's CPU) to check the history against
// and the queues.
func allPolicies(ctx context.Context, c client.Client, ns string) (policies, []queueSetup) {
	ginkgo.GinkgoHelper()
	createNamespace(ctx, c, ns)
	cohort := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"preemption": map[string]any{"reclaimMinRuntime": reclaimMinRuntime.String()},
	}}}
	cohort.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("Cohort"))
	cohort.SetName(cohortName)
	// The webhook may still be starting with the manager: retry until it answers.
	gomega.Eventually(func() error { return client.IgnoreAlreadyExists(c.Create(ctx, cohort.DeepCopy())) }, timeout, interval).Should(gomega.Succeed())
	queues := []queueSetup{
		{name: "ts", cpu: 4, preemption: map[string]any{
			"withinClusterQueue":       "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": minAdmitDuration.String()},
			"reclaimWithinCohort":      "Any",
			"preemptMinRuntime":        tsPreemptMin.String(),
		}},
		{name: "prio", cpu: 4, preemption: map[string]any{
			"withinClusterQueue":  "LowerPriority",
			"reclaimWithinCohort": "Any",
			"preemptMinRuntime":   prioPreemptMin.String(),
		}},
	}
	for _, q := range queues {
		gomega.Expect(util.CreateClusterQueue(ctx, c, ns, q.name, fmt.Sprint(q.cpu), cohortName, q.preemption)).To(gomega.Succeed())
	}
	capacity := int64(0)
	for _, q := range queues {
		capacity += q.cpu * 1000
	}
	return policies{
		preemptMinRuntime: map[string]time.Duration{"ts": tsPreemptMin, "prio": prioPreemptMin},
		reclaimMinRuntime: map[string]time.Duration{"ts": reclaimMinRuntime, "prio": reclaimMinRuntime},
		minAdmitDuration:  map[string]time.Duration{"ts": minAdmitDuration},
		toleration:        map[string]time.Duration{"tolerant": tolerationSeconds * time.Second},
		capacity:          capacity,
	}, queues
}

// jobSpec is one Job of a stream, drawn in advance so that a seed replays the run.
type jobSpec struct {
	name, queue, class string
	cpu                int64
	expected           bool
	// after is the pause before it is submitted; runFor how long it runs once admitted.
	after, runFor time.Duration
}

func (s jobSpec) job(ns string) *batchv1.Job {
	j := util.CPUJob(ns, s.name, s.queue, fmt.Sprint(s.cpu))
	j.Labels[constants.WorkloadPriorityClassLabel] = s.class
	if s.expected {
		j.Annotations = map[string]string{annotations.ExpectedRuntime: expectedRuntime.String(), annotations.RequeueDelay: "5s"}
	}
	return j
}

// drawJobs draws n Jobs over queues: one or two CPUs, priority low, tolerant or high, a third
// opting in to expected-runtime requeue; submitted every 0.2-0.8 s, running 4-20 s. In the long
// form one in eight runs 70-120 s, past minAdmitDuration, so that time-sharing preempts too.
func drawJobs(rng *rand.Rand, n int, queues []queueSetup) []jobSpec {
	classes := []string{"low", "low", "tolerant", "high", "high"}
	out := make([]jobSpec, n)
	for i := range out {
		out[i] = jobSpec{
			name:     fmt.Sprintf("job-%04d", i),
			queue:    queues[rng.IntN(len(queues))].name,
			class:    classes[rng.IntN(len(classes))],
			cpu:      1 + rng.Int64N(2),
			expected: rng.IntN(3) == 0,
			after:    time.Duration(200+rng.IntN(600)) * time.Millisecond,
			runFor:   time.Duration(4+rng.IntN(17)) * time.Second,
		}
		if long && rng.IntN(8) == 0 {
			out[i].runFor = time.Duration(70+rng.IntN(51)) * time.Second
		}
	}
	return out
}

// stream submits Jobs at their pace, retrying those the API refuses (the webhooks are down while
// no manager runs), and completes admitted Jobs once they have run for their time.
type stream struct {
	c       client.Client
	ns      string
	jobs    []jobSpec
	runFor  map[string]time.Duration
	created atomic.Int32
	// refused counts creations refused while no manager served the webhooks.
	refused  atomic.Int32
	finished atomic.Int32
	done     chan struct{}
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func startStream(c client.Client, ns string, jobs []jobSpec) *stream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{c: c, ns: ns, jobs: jobs, runFor: map[string]time.Duration{}, done: make(chan struct{}), cancel: cancel}
	for _, j := range jobs {
		s.runFor[j.name] = j.runFor
	}
	s.wg.Add(2)
	go s.submit(ctx)
	go s.finish(ctx)
	ginkgo.DeferCleanup(s.stop)
	return s
}

func (s *stream) stop() {
	s.cancel()
	s.wg.Wait()
}

func (s *stream) submit(ctx context.Context) {
	defer s.wg.Done()
	defer close(s.done)
	for _, j := range s.jobs {
		select {
		case <-ctx.Done():
			return
		case <-time.After(j.after):
		}
		for {
			err := s.c.Create(ctx, j.job(s.ns))
			if err == nil || apierrors.IsAlreadyExists(err) {
				s.created.Add(1)
				break
			}
			s.refused.Add(1)
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}
}

// finish completes, every tick, the Jobs whose Workloads have been admitted for their run time,
// as the Job controller would once their pods succeed.
func (s *stream) finish(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var wls kueue.WorkloadList
		if err := s.c.List(ctx, &wls, client.InNamespace(s.ns)); err != nil {
			continue
		}
		for i := range wls.Items {
			wl := &wls.Items[i]
			adm := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted)
			if !isTrue(adm) || apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) ||
				apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
				continue
			}
			job := ownerJob(wl)
			if time.Since(adm.LastTransitionTime.Time) < s.runFor[job] {
				continue
			}
			if completeJob(ctx, s.c, s.ns, job) == nil {
				s.finished.Add(1)
			}
		}
	}
}

func ownerJob(wl *kueue.Workload) string {
	for _, o := range wl.OwnerReferences {
		if o.Kind == "Job" {
			return o.Name
		}
	}
	return ""
}

// completeJob reports the Job as succeeded if it runs (is unsuspended) and has not completed yet.
func completeJob(ctx context.Context, c client.Client, ns, name string) error {
	var j batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &j); err != nil {
		return err
	}
	if ptr.Deref(j.Spec.Suspend, true) {
		return fmt.Errorf("job %s is suspended", name)
	}
	for _, cond := range j.Status.Conditions {
		if cond.Type == batchv1.JobComplete {
			return fmt.Errorf("job %s completed already", name)
		}
	}
	now := metav1.Now()
	j.Status.StartTime = &now
	j.Status.CompletionTime = &now
	j.Status.Succeeded = ptr.Deref(j.Spec.Completions, 1)
	j.Status.Conditions = append(j.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now})
	return c.Status().Update(ctx, &j)
}

// state is the settled outcome of a run.
type state struct {
	finished, admitted, pending int
	// parked are pending workloads never tried, equivalent to one that was.
	parked int
}

// shapeOf is what makes two workloads of this suite equivalent for the queue: their queue,
// priority and request.
func shapeOf(wl *kueue.Workload) string {
	return fmt.Sprintf("%s/%d/%s", wl.Spec.QueueName, ptr.Deref(wl.Spec.Priority, 0), wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests.Cpu())
}

// checkSettled fails g unless every Job has exactly one Workload that is finished, admitted (quota
// reserved, Admitted, status.admission set, not being evicted, the Job running) or pending (with a
// QuotaReserved=False condition that has a reason, or equivalent to one that has, no admission,
// the Job suspended); and unless,
// for every ClusterQueue, the requests of the Workloads holding its quota, summed from the API,
// equal its status's reservation and usage and stay within what it may hold.
func checkSettled(g gomega.Gomega, ctx context.Context, c client.Client, ns string, queues []queueSetup) state {
	var jobs batchv1.JobList
	g.Expect(c.List(ctx, &jobs, client.InNamespace(ns))).To(gomega.Succeed())
	var wls kueue.WorkloadList
	g.Expect(c.List(ctx, &wls, client.InNamespace(ns))).To(gomega.Succeed())
	byJob := map[string][]*kueue.Workload{}
	for i := range wls.Items {
		byJob[ownerJob(&wls.Items[i])] = append(byJob[ownerJob(&wls.Items[i])], &wls.Items[i])
	}
	var st state
	var neverTried []*kueue.Workload
	explained := map[string]bool{}
	used := map[string]*resource.Quantity{}
	count := map[string]int32{}
	for _, q := range queues {
		used[q.name] = resource.NewQuantity(0, resource.DecimalSI)
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		g.Expect(byJob[j.Name]).To(gomega.HaveLen(1), "Job %s has exactly one Workload", j.Name)
		wl := byJob[j.Name][0]
		conds := wl.Status.Conditions
		name := describe(wl)
		suspended := ptr.Deref(j.Spec.Suspend, false)
		switch {
		case apimeta.IsStatusConditionTrue(conds, kueue.WorkloadFinished):
			st.finished++
		case apimeta.IsStatusConditionTrue(conds, kueue.WorkloadQuotaReserved):
			g.Expect(wl.Status.Admission).NotTo(gomega.BeNil(), "%s holds quota with status.admission", name)
			g.Expect(apimeta.IsStatusConditionTrue(conds, kueue.WorkloadAdmitted)).To(gomega.BeTrue(), "%s holds quota and is admitted", name)
			// A CI log keeps only the end of a failure: the Job's state goes last.
			g.Expect(stuckAdmission(wl, j)).To(gomega.BeEmpty(), "an admitted workload that stays half evicted or whose Job does not run")
			cq := string(wl.Status.Admission.ClusterQueue)
			g.Expect(used).To(gomega.HaveKey(cq))
			for _, ps := range wl.Status.Admission.PodSetAssignments {
				q := ps.ResourceUsage[corev1.ResourceCPU]
				used[cq].Add(q)
			}
			// What was reserved is what the Job asks for.
			req := j.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
			reserved := wl.Status.Admission.PodSetAssignments[0].ResourceUsage[corev1.ResourceCPU]
			g.Expect(reserved.Cmp(req)).To(gomega.Equal(0), "%s reserved what its Job asks", name)
			count[cq]++
			st.admitted++
		default:
			g.Expect(wl.Status.Admission).To(gomega.BeNil(), "pending %s has no admission", name)
			g.Expect(suspended).To(gomega.BeTrue(), "the Job of pending %s is suspended", name)
			st.pending++
			qr := apimeta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved)
			if qr == nil {
				neverTried = append(neverTried, wl)
				continue
			}
			g.Expect(qr.Status).To(gomega.Equal(metav1.ConditionFalse), "pending %s", name)
			g.Expect(qr.Reason).NotTo(gomega.BeEmpty(), "pending %s says why", name)
			explained[shapeOf(wl)] = true
		}
	}
	// Upstream's queue parks, untried, the workloads equivalent to a head it could not admit
	// (SchedulingEquivalenceHashing): they get no condition until something changes. Each must
	// be equivalent to a pending workload that says why.
	for _, wl := range neverTried {
		g.Expect(explained).To(gomega.HaveKey(shapeOf(wl)), "pending %s has no QuotaReserved condition, and no equivalent workload says why", describe(wl))
		st.parked++
	}
	g.Expect(len(wls.Items)).To(gomega.Equal(len(jobs.Items)), "every Workload belongs to a Job")

	total, nominal := resource.NewQuantity(0, resource.DecimalSI), resource.NewQuantity(0, resource.DecimalSI)
	for _, q := range queues {
		var cq kueue.ClusterQueue
		g.Expect(c.Get(ctx, client.ObjectKey{Name: q.name}, &cq)).To(gomega.Succeed())
		g.Expect(cq.Status.ReservingWorkloads).To(gomega.Equal(count[q.name]), "ClusterQueue %s counts the workloads holding its quota", q.name)
		g.Expect(cq.Status.AdmittedWorkloads).To(gomega.Equal(count[q.name]), "ClusterQueue %s counts its admitted workloads", q.name)
		for what, fu := range map[string][]kueue.FlavorUsage{"flavorsReservation": cq.Status.FlavorsReservation, "flavorsUsage": cq.Status.FlavorsUsage} {
			g.Expect(fu).To(gomega.HaveLen(1))
			g.Expect(fu[0].Resources).To(gomega.HaveLen(1))
			g.Expect(fu[0].Resources[0].Total.Cmp(*used[q.name])).To(gomega.Equal(0),
				"ClusterQueue %s status.%s %s = the sum of its workloads' requests %s", q.name, what, fu[0].Resources[0].Total.String(), used[q.name].String())
		}
		total.Add(*used[q.name])
		nominal.Add(*resource.NewQuantity(q.cpu, resource.DecimalSI))
	}
	// Each ClusterQueue may borrow what the others do not use: the cohort is the bound.
	g.Expect(total.Cmp(*nominal)).To(gomega.BeNumerically("<=", 0), "the cohort holds %s of %s CPUs", total.String(), nominal.String())
	return st
}

// stuckAdmission says what is wrong with a workload holding quota that is being evicted or whose
// Job is suspended, ending with the Job's state; "" if nothing is.
func stuckAdmission(wl *kueue.Workload, j *batchv1.Job) string {
	var what []string
	if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) {
		what = append(what, "being evicted while holding quota")
	}
	if ptr.Deref(j.Spec.Suspend, false) {
		what = append(what, "admitted while its Job is suspended")
	}
	if len(what) == 0 {
		return ""
	}
	var jc []string
	for _, c := range j.Status.Conditions {
		jc = append(jc, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	return fmt.Sprintf("%s: %s\nJob %s: suspend=%t, active=%d, conditions %v, generation %d, resourceVersion %s",
		describe(wl), strings.Join(what, ", "), j.Name, ptr.Deref(j.Spec.Suspend, false), j.Status.Active, jc, j.Generation, j.ResourceVersion)
}

// expectSettled waits until checkSettled holds. Protections that end later may still start
// preemptions afterwards (minAdmitDuration is a minute): the state need not stay put, only be
// reached; drain then checks that everything runs in the end.
func expectSettled(ctx context.Context, c client.Client, ns string, queues []queueSetup) state {
	ginkgo.GinkgoHelper()
	var st state
	gomega.Eventually(func(g gomega.Gomega) { st = checkSettled(g, ctx, c, ns, queues) }, 2*timeout, interval).Should(gomega.Succeed())
	return st
}

// drain completes every running Job until every Workload has finished: none is lost or stuck.
// It allows three minutes, or a second per Workload if there are more.
func drain(ctx context.Context, c client.Client, ns string) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		var wls kueue.WorkloadList
		g.Expect(c.List(ctx, &wls, client.InNamespace(ns))).To(gomega.Succeed())
		unfinished := 0
		for i := range wls.Items {
			wl := &wls.Items[i]
			if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
				continue
			}
			unfinished++
			if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
				_ = completeJob(ctx, c, ns, ownerJob(wl))
			}
		}
		g.Expect(unfinished).To(gomega.BeZero(), "workloads not finished yet")
	}, drainTimeout(ctx, c, ns), 500*time.Millisecond).Should(gomega.Succeed())
}

// describe names a workload with its conditions, for failure messages.
func describe(wl *kueue.Workload) string {
	var b strings.Builder
	b.WriteString(wl.Name)
	for _, c := range wl.Status.Conditions {
		fmt.Fprintf(&b, "\n  %s=%s %s at %s: %.160s", c.Type, c.Status, c.Reason, c.LastTransitionTime.Format(time.RFC3339), c.Message)
	}
	return b.String()
}

// dumpOnFailure prints, if the spec fails, every Workload of ns with its conditions and every
// ClusterQueue's status: what a failure needs to be understood.
func dumpOnFailure(c client.Client, ns string) {
	ginkgo.DeferCleanup(func(ctx context.Context) {
		if !ginkgo.CurrentSpecReport().Failed() {
			return
		}
		var wls kueue.WorkloadList
		if err := c.List(ctx, &wls, client.InNamespace(ns)); err == nil {
			for i := range wls.Items {
				wl := &wls.Items[i]
				prio := int32(0)
				if wl.Spec.Priority != nil {
					prio = *wl.Spec.Priority
				}
				ginkgo.GinkgoWriter.Printf("workload %s (queue %s, priority %d, cpu %s)\n", describe(wl), wl.Spec.QueueName, prio,
					wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests.Cpu())
			}
		}
		var cqs kueue.ClusterQueueList
		if err := c.List(ctx, &cqs); err == nil {
			for _, cq := range cqs.Items {
				ginkgo.GinkgoWriter.Printf("clusterqueue %s: pending %d, reserving %d, reservation %v\n", cq.Name, cq.Status.PendingWorkloads, cq.Status.ReservingWorkloads, cq.Status.FlavorsReservation)
			}
		}
	})
}

func drainTimeout(ctx context.Context, c client.Client, ns string) time.Duration {
	ginkgo.GinkgoHelper()
	var wls kueue.WorkloadList
	gomega.Expect(c.List(ctx, &wls, client.InNamespace(ns))).To(gomega.Succeed())
	return max(3*timeout, time.Duration(len(wls.Items))*time.Second)
}
