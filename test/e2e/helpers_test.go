package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// newNamespace creates a namespace for one spec, whose Jobs and Pods are deleted when the spec
// ends so that the simulated Nodes have room for the next spec's Pods.
func newNamespace(ctx context.Context, prefix string) string {
	ginkgo.GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	gomega.Expect(k8s.Create(ctx, ns)).To(gomega.Succeed())
	ginkgo.DeferCleanup(func(ctx context.Context) {
		gomega.Expect(k8s.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns.Name),
			client.PropagationPolicy(metav1.DeletePropagationBackground))).To(gomega.Succeed())
		gomega.Expect(k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns.Name))).To(gomega.Succeed())
	})
	return ns.Name
}

// clusterQueue creates a ClusterQueue with cpu of the default flavor and preemption, and a
// LocalQueue of the same name in ns.
func clusterQueue(ctx context.Context, ns, name, cpu string, preemption map[string]any) {
	ginkgo.GinkgoHelper()
	clusterQueueIn(ctx, ns, name, cpu, "", preemption)
}

// readyAt waits until j's Workload has PodsReady True and returns when it became so.
func readyAt(ctx context.Context, j *batchv1.Job) time.Time {
	ginkgo.GinkgoHelper()
	var at time.Time
	gomega.Eventually(func(g gomega.Gomega) {
		c := apimeta.FindStatusCondition(workload(g, ctx, j).Status.Conditions, kueue.WorkloadPodsReady)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
		at = c.LastTransitionTime.Time
	}, time.Minute, interval).Should(gomega.Succeed())
	return at
}

// clusterQueueIn is clusterQueue in the Cohort cohort (none: "").
func clusterQueueIn(ctx context.Context, ns, name, cpu, cohort string, preemption map[string]any) {
	ginkgo.GinkgoHelper()
	gomega.Expect(util.CreateClusterQueue(ctx, k8s, ns, name, cpu, cohort, preemption)).To(gomega.Succeed())
	// The scheduler only takes workloads of an active ClusterQueue.
	gomega.Eventually(func(g gomega.Gomega) {
		var cq kueue.ClusterQueue
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, &cq)).To(gomega.Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive)).To(gomega.BeTrue())
	}, time.Minute, interval).Should(gomega.Succeed())
}

// jobSpec is a Job of pods Pods of cpu CPUs each.
type jobSpec struct {
	name, queue, cpu string
	pods             int32
	// runtime, readyAfter and unreadyEvery are the simulated kubelets' annotations; empty: none.
	runtime, readyAfter, unreadyEvery string
	grace                             int64
	priorityClass                     string
	annotations                       map[string]string
}

func newJob(ns string, s jobSpec) *batchv1.Job {
	j := util.CPUJob(ns, s.name, s.queue, s.cpu)
	if s.pods == 0 {
		s.pods = 1
	}
	j.Spec.Parallelism, j.Spec.Completions = ptr.To(s.pods), ptr.To(s.pods)
	j.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(s.grace)
	tmpl := map[string]string{}
	if s.runtime != "" {
		tmpl[controlplane.SimulatedRuntimeAnnotation] = s.runtime
	}
	if s.readyAfter != "" {
		tmpl[controlplane.SimulatedReadyAfterAnnotation] = s.readyAfter
	}
	if s.unreadyEvery != "" {
		tmpl[controlplane.SimulatedUnreadyEveryAnnotation] = s.unreadyEvery
	}
	j.Spec.Template.Annotations = tmpl
	if s.priorityClass != "" {
		j.Labels[constants.WorkloadPriorityClassLabel] = s.priorityClass
	}
	j.Annotations = s.annotations
	return j
}

func submit(ctx context.Context, objs ...client.Object) {
	ginkgo.GinkgoHelper()
	for _, o := range objs {
		gomega.Expect(k8s.Create(ctx, o)).To(gomega.Succeed())
	}
}

func priorityClass(ctx context.Context, name string, value int32, annotations map[string]string) {
	ginkgo.GinkgoHelper()
	submit(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Value: value})
}

// jobPods are the Pods of job j that still exist.
func jobPods(ctx context.Context, j *batchv1.Job) []corev1.Pod {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{batchv1.JobNameLabel: j.Name}); err != nil {
		return nil
	}
	return pods.Items
}

// running counts Pods that run and are not being deleted.
func running(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// alive counts Pods whose containers (simulated) still run, terminating ones included.
func alive(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

func workload(g gomega.Gomega, ctx context.Context, j *batchv1.Job) *kueue.Workload {
	return util.WorkloadOf(g, ctx, k8s, j)
}

// holding says whether a Workload holds quota now.
func holding(wl *kueue.Workload) bool {
	return apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) &&
		!apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) &&
		!apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)
}

// expectRunning waits until every Pod of j runs on a Node, and returns when that was seen.
func expectRunning(ctx context.Context, j *batchv1.Job, within time.Duration) time.Time {
	ginkgo.GinkgoHelper()
	want := int(ptr.Deref(j.Spec.Parallelism, 1))
	gomega.Eventually(func(g gomega.Gomega) {
		pods := jobPods(ctx, j)
		g.Expect(running(pods)).To(gomega.Equal(want), "running Pods of %s", j.Name)
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				g.Expect(p.Spec.NodeName).To(gomega.HavePrefix("node-"), "Pod %s scheduled to a simulated Node", p.Name)
			}
		}
	}, within, interval).Should(gomega.Succeed())
	return time.Now()
}

// admittedAt waits for j's Workload to hold quota and returns its QuotaReserved and Admitted times.
func admittedAt(ctx context.Context, j *batchv1.Job) (reserved, admitted time.Time) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		wl := workload(g, ctx, j)
		g.Expect(holding(wl)).To(gomega.BeTrue(), "%s holds quota", j.Name)
		g.Expect(apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)).To(gomega.BeTrue())
		reserved = apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved).LastTransitionTime.Time
		admitted = apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted).LastTransitionTime.Time
	}, time.Minute, interval).Should(gomega.Succeed())
	return reserved, admitted
}

// handover is what a user sees when a Job gives its place to another.
type handover struct {
	// evicted is the Evicted condition's time (one-second resolution); seen when the spec, polling
	// every 100 ms, first saw it.
	evicted, seen, victimGone, nextRunning time.Time
	reason                                 string
}

func (h handover) String() string {
	return fmt.Sprintf("evicted %s (%s, seen %s); from then: victim's Pods gone +%s, next Job's Pods Running +%s",
		h.evicted.Format("15:04:05"), h.reason, h.seen.Format("15:04:05.000"), h.victimGone.Sub(h.seen).Round(10*time.Millisecond),
		h.nextRunning.Sub(h.seen).Round(10*time.Millisecond))
}

// expectHandover checks that victim keeps its quota and Pods, and preemptor waits, until
// notBefore; then victim is evicted for reason, its Pods terminate and preemptor's Pods run.
func expectHandover(ctx context.Context, victim, preemptor *batchv1.Job, notBefore time.Time, reason string) handover {
	ginkgo.GinkgoHelper()
	// The preemptor's Workload is created by the job reconciler after the Job: wait until the
	// scheduler has tried it and kept it waiting before checking that it keeps waiting.
	ginkgo.By(fmt.Sprintf("seeing %s pending", preemptor.Name))
	gomega.Eventually(func(g gomega.Gomega) {
		c := apimeta.FindStatusCondition(workload(g, ctx, preemptor).Status.Conditions, kueue.WorkloadQuotaReserved)
		g.Expect(c).NotTo(gomega.BeNil(), "%s was tried by the scheduler", preemptor.Name)
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse), "%s waits", preemptor.Name)
	}, 30*time.Second, interval).Should(gomega.Succeed())
	if wait := time.Until(notBefore) - 2*time.Second; wait > 0 {
		ginkgo.By(fmt.Sprintf("keeping %s running and %s waiting until %s", victim.Name, preemptor.Name, notBefore.Format(time.TimeOnly)))
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(holding(workload(g, ctx, victim))).To(gomega.BeTrue(), "%s holds its quota", victim.Name)
			g.Expect(running(jobPods(ctx, victim))).To(gomega.BeNumerically(">", 0), "%s's Pods run", victim.Name)
			g.Expect(holding(workload(g, ctx, preemptor))).To(gomega.BeFalse(), "%s waits", preemptor.Name)
			g.Expect(jobPods(ctx, preemptor)).To(gomega.BeEmpty(), "%s has no Pods", preemptor.Name)
		}, wait, time.Second).Should(gomega.Succeed())
	}
	var h handover
	ginkgo.By(fmt.Sprintf("evicting %s for %s", victim.Name, reason))
	gomega.Eventually(func(g gomega.Gomega) {
		wl := workload(g, ctx, victim)
		c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
		h.reason = c.Reason
		if p := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); p != nil && p.Status == metav1.ConditionTrue {
			h.reason = p.Reason
		}
		h.evicted = c.LastTransitionTime.Time
		h.seen = time.Now()
	}, time.Until(notBefore)+time.Minute, 100*time.Millisecond).Should(gomega.Succeed())
	gomega.Expect(h.reason).To(gomega.Equal(reason))
	// lastTransitionTime has one-second resolution.
	gomega.Expect(h.evicted).To(gomega.BeTemporally(">=", notBefore.Truncate(time.Second)), "not evicted before %s", notBefore)
	// Both watched at once: the next Job's Pods may start before the victim's are gone.
	want := int(ptr.Deref(preemptor.Spec.Parallelism, 1))
	gomega.Eventually(func(g gomega.Gomega) {
		now := time.Now()
		if h.victimGone.IsZero() && len(jobPods(ctx, victim)) == 0 {
			h.victimGone = now
		}
		if h.nextRunning.IsZero() && running(jobPods(ctx, preemptor)) == want {
			h.nextRunning = now
		}
		g.Expect(h.victimGone).NotTo(gomega.BeZero(), "%s's Pods gone", victim.Name)
		g.Expect(h.nextRunning).NotTo(gomega.BeZero(), "%s's Pods running", preemptor.Name)
	}, 2*time.Minute, 100*time.Millisecond).Should(gomega.Succeed())
	return h
}

// sampler records, every few hundred milliseconds, what a user would see of some Jobs: whether
// each holds quota, and its running and terminating Pods.
type sampler struct {
	jobs    []*batchv1.Job
	cpu     map[string]int64 // milli-CPUs per Pod, by Job
	mu      sync.Mutex
	samples []sample
	stop    chan struct{}
	done    chan struct{}
}

type sample struct {
	at      time.Time
	holds   map[string]bool
	reserve map[string]time.Time
	evicted map[string]time.Time
	running map[string]int
	alive   map[string]int
}

func startSampler(ctx context.Context, jobs ...*batchv1.Job) *sampler {
	s := &sampler{jobs: jobs, cpu: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, j := range jobs {
		q := j.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		s.cpu[j.Name] = q.MilliValue()
	}
	go func() {
		defer close(s.done)
		defer ginkgo.GinkgoRecover()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			x := sample{at: time.Now(), holds: map[string]bool{}, reserve: map[string]time.Time{}, evicted: map[string]time.Time{},
				running: map[string]int{}, alive: map[string]int{}}
			var wls kueue.WorkloadList
			if err := k8s.List(ctx, &wls, client.InNamespace(jobs[0].Namespace)); err != nil {
				continue
			}
			for _, j := range jobs {
				pods := jobPods(ctx, j)
				x.running[j.Name], x.alive[j.Name] = running(pods), alive(pods)
				for i := range wls.Items {
					wl := &wls.Items[i]
					if len(wl.OwnerReferences) == 0 || wl.OwnerReferences[0].Name != j.Name {
						continue
					}
					x.holds[j.Name] = holding(wl)
					if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil && c.Status == metav1.ConditionTrue {
						x.reserve[j.Name] = c.LastTransitionTime.Time
					}
					if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
						x.evicted[j.Name] = c.LastTransitionTime.Time
					}
				}
			}
			s.mu.Lock()
			s.samples = append(s.samples, x)
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *sampler) finish() []sample {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

func (s *sampler) latest() sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return sample{}
	}
	return s.samples[len(s.samples)-1]
}

// turn is one holder's time with the quota, as sampled.
type turn struct {
	holder, previous string
	// reserved is the holder's QuotaReserved time; evictedPrev the previous holder's Evicted time.
	reserved, evictedPrev time.Time
	// seenEvicted is when the previous holder was first seen without quota; prevGone when its
	// Pods were first seen all stopped, and prevLastAlive the sample before, the last in which
	// one of them was seen (a sample reads the API after its time: on a loaded machine its read
	// may come seconds after, so the Pods were gone between the two); running when the holder's
	// Pods were first seen running.
	seenEvicted, prevGone, prevLastAlive, running time.Time
}

// turns splits samples into turns: a turn starts when a Job is seen holding quota after another.
func turns(samples []sample, jobs []*batchv1.Job) []turn {
	var out []turn
	current := ""
	for i, x := range samples {
		for _, j := range jobs {
			if !x.holds[j.Name] || j.Name == current {
				continue
			}
			t := turn{holder: j.Name, previous: current, reserved: x.reserve[j.Name], seenEvicted: x.at}
			if current != "" {
				// The previous holder's eviction: the first sample where it stopped holding.
				for k := i; k >= 0 && !samples[k].holds[current]; k-- {
					t.seenEvicted = samples[k].at
				}
				t.evictedPrev = x.evicted[current]
				for k := i; k < len(samples); k++ {
					if samples[k].alive[current] == 0 {
						t.prevGone = samples[k].at
						if k > 0 {
							t.prevLastAlive = samples[k-1].at
						}
						break
					}
				}
			}
			for _, y := range samples[i:] {
				if y.running[j.Name] > 0 {
					t.running = y.at
					break
				}
			}
			out = append(out, t)
			current = j.Name
			break
		}
	}
	return out
}

// overcommit is how long, in the samples, Pods of more than one Job ran at once beyond quota
// milli-CPUs, and the most CPUs they used.
func overcommit(samples []sample, s *sampler, quota int64) (time.Duration, int64) {
	var total time.Duration
	var peak int64
	for i, x := range samples {
		used := int64(0)
		jobsRunning := 0
		for name, n := range x.alive {
			used += int64(n) * s.cpu[name]
			if n > 0 {
				jobsRunning++
			}
		}
		peak = max(peak, used)
		if used > quota && jobsRunning > 1 && i > 0 {
			total += x.at.Sub(samples[i-1].at)
		}
	}
	return total, peak
}

func describeTurns(ts []turn) string {
	var b strings.Builder
	for i, t := range ts {
		if t.previous == "" {
			fmt.Fprintf(&b, "turn %d: %s reserved %s, Pods Running %s\n", i+1, t.holder, t.reserved.Format("15:04:05"), t.running.Format("15:04:05.000"))
			continue
		}
		fmt.Fprintf(&b, "turn %d: %s -> %s: evicted %s (seen %s); victim's Pods gone +%s; next Pods Running +%s\n",
			i+1, t.previous, t.holder, t.evictedPrev.Format("15:04:05"), t.seenEvicted.Format("15:04:05.000"),
			since(t.seenEvicted, t.prevGone), since(t.seenEvicted, t.running))
	}
	return b.String()
}

func since(from, to time.Time) string {
	if to.IsZero() {
		return "(not seen)"
	}
	return to.Sub(from).Round(10 * time.Millisecond).String()
}
