package scheduler_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueconstants "sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/constants"
	jobcontroller "sigs.k8s.io/kueue/pkg/controller/jobs/job"
	tasutil "sigs.k8s.io/kueue/pkg/util/tas"
	"sigs.k8s.io/kueue/pkg/workload"
	"sigs.k8s.io/kueue/pkg/workloadslicing"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

const (
	timeout  = 45 * time.Second
	interval = 200 * time.Millisecond
	// settle is how long an outcome must hold before it is recorded.
	settle = time.Second
	flavor = "default-flavor"
)

// schedulerKind is one of the admission loops under comparison.
type schedulerKind struct {
	name     string
	upstream bool
	// headsPerCycle, when set, is our loop's timeshare.headsPerCycle: the scenarios' outcomes,
	// taken once each step settles, must not depend on how many workloads a cycle admits.
	headsPerCycle int
}

var kinds = []schedulerKind{{name: "upstream", upstream: true}, {name: "kueue-timeshare"}, {name: "kueue-timeshare-32", headsPerCycle: 32}}

// priorities are the WorkloadPriorityClasses every environment has, by name.
var priorities = map[string]int32{"p100": 100, "p200": 200, "p300": 300, "p400": 400, "p1000": 1000}

// startEnv brings up a control plane and a manager running the given scheduler, with the
// objects every scenario shares.
func startEnv(k schedulerKind, gates map[string]bool, configExtra string) *util.Env {
	gets := &namespaceGets{}
	if k.headsPerCycle > 0 {
		configExtra += fmt.Sprintf("timeshare:\n  headsPerCycle: %d\n", k.headsPerCycle)
	}
	env, err := util.Start(util.Settings{
		FeatureGates:      gates,
		ConfigExtra:       configExtra,
		Log:               ctrl.Log.WithName(k.name),
		UpstreamScheduler: k.upstream,
		ClientWrapper:     gets.wrap,
	})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	attempts[env] = gets
	ctx := context.Background()
	gomega.Expect(env.Client.Create(ctx, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: flavor}})).To(gomega.Succeed())
	for name, v := range priorities {
		gomega.Expect(env.Client.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v})).To(gomega.Succeed())
	}
	return env
}

// run is one scenario in one environment. Jobs are named by the scenario, so outcomes of
// the two schedulers can be compared by job name.
type run struct {
	ctx  context.Context
	env  *util.Env
	ns   string
	jobs []string
	cqs  []string
	// counters are the scheduler's counters of the run's ClusterQueues when it started:
	// the registry is shared by every manager of the process.
	counters map[string]float64
	// racyEvents are event reasons left out of the result: a scenario sets them for events
	// that a race outside the scheduler's decisions lets it emit or not.
	racyEvents []string
	// attempts counts the scheduler's admission attempts by namespace.
	attempts *namespaceGets
	result   scenarioResult
}

// scenarioResult is what the two schedulers must agree on.
type scenarioResult struct {
	// States are the Jobs' outcomes at each step, keyed by "step/job".
	States map[string]jobOutcome
	// Events are the reasons of the admission loop's events for each Job's Workload.
	Events map[string][]string
	// Counters are the changes of the admission and eviction counters per ClusterQueue.
	Counters map[string]float64
	// Queues are how the queue holds waiting heads at each step that looks, keyed by
	// "step/ClusterQueue".
	Queues map[string]queueOutcome
}

func newRun(env *util.Env, ns string) *run {
	r := &run{ctx: context.Background(), env: env, ns: ns, counters: map[string]float64{}, attempts: attempts[env], result: scenarioResult{States: map[string]jobOutcome{}}}
	gomega.Expect(env.Client.Create(r.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(gomega.Succeed())
	return r
}

// countedMetrics are counters the admission loop (or the preemptor it calls) increments.
var countedMetrics = []string{
	"kueue_quota_reserved_workloads_total",
	"kueue_admitted_workloads_total",
	"kueue_evicted_workloads_total",
	"kueue_preempted_workloads_total",
}

// readCounters sums the counted metrics per ClusterQueue, for the named ClusterQueues.
func readCounters(cqs []string) map[string]float64 {
	families, err := ctrlmetrics.Registry.Gather()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if !slices.Contains(countedMetrics, f.GetName()) {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if (l.GetName() == "cluster_queue" || l.GetName() == "preempting_cluster_queue") && slices.Contains(cqs, l.GetValue()) {
					out[f.GetName()+"{"+l.GetName()+"="+l.GetValue()+"}"] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// finish records the events and counter changes of the run once they are settled.
func (r *run) finish() {
	ginkgo.GinkgoHelper()
	var last string
	gomega.Eventually(func(g gomega.Gomega) {
		var list eventsv1.EventList
		g.Expect(r.env.Client.List(r.ctx, &list, client.InNamespace(r.ns))).To(gomega.Succeed())
		later := r.laterSlices(g)
		events := map[string][]string{}
		for _, e := range list.Items {
			if e.ReportingController != kueueconstants.AdmissionName || e.Regarding.Kind != "Workload" || slices.Contains(r.racyEvents, e.Reason) {
				continue
			}
			job := normalize(e.Regarding.Name)
			if n, ok := later[e.Regarding.Name]; ok {
				job += fmt.Sprintf("#%d", n)
			}
			if !slices.Contains(events[job], e.Reason) {
				events[job] = append(events[job], e.Reason)
			}
		}
		for _, reasons := range events {
			slices.Sort(reasons)
		}
		counters := readCounters(r.cqs)
		for k, v := range r.counters {
			counters[k] -= v
			if counters[k] == 0 {
				delete(counters, k)
			}
		}
		now := fmt.Sprint(events, counters)
		stable := now == last
		last = now
		r.result.Events, r.result.Counters = events, counters
		g.Expect(stable).To(gomega.BeTrue(), "events still arriving")
	}, timeout, settle).Should(gomega.Succeed())
}

// laterSlices maps the names of the Workloads that are not the first slice of their Job to
// their place in the Job's slice order, so that each slice's events are kept apart.
func (r *run) laterSlices(g gomega.Gomega) map[string]int {
	var list kueue.WorkloadList
	g.Expect(r.env.Client.List(r.ctx, &list, client.InNamespace(r.ns))).To(gomega.Succeed())
	out := map[string]int{}
	for _, key := range r.jobs {
		name, n := splitSliceKey(key)
		if n != 1 {
			continue
		}
		chain := slicesOf(list.Items, name)
		if len(chain) < 2 {
			continue // also a Workload without a Job
		}
		for i, wl := range chain[1:] {
			out[wl.Name] = i + 2
		}
	}
	return out
}

type cqOption func(*kueue.ClusterQueue)

func inCohort(name string) cqOption {
	return func(cq *kueue.ClusterQueue) { cq.Spec.CohortName = kueue.CohortReference(name) }
}

func borrowingLimit(q string) cqOption {
	return func(cq *kueue.ClusterQueue) {
		cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].BorrowingLimit = ptr.To(resource.MustParse(q))
	}
}

func preemption(within, reclaim kueue.PreemptionPolicy) cqOption {
	return func(cq *kueue.ClusterQueue) {
		cq.Spec.Preemption = &kueue.ClusterQueuePreemption{WithinClusterQueue: within, ReclaimWithinCohort: reclaim}
	}
}

func strictFIFO(cq *kueue.ClusterQueue) { cq.Spec.QueueingStrategy = kueue.StrictFIFO }

// clusterQueue creates a ClusterQueue with cpu quota in the default flavor, and a
// LocalQueue of the same name in the run's namespace.
func (r *run) clusterQueue(name, cpu string, opts ...cqOption) {
	cq := util.CPUClusterQueue(name, cpu)
	for _, o := range opts {
		o(cq)
	}
	r.cqs = append(r.cqs, name)
	for k, v := range readCounters([]string{name}) {
		r.counters[k] = v
	}
	gomega.Expect(r.env.Client.Create(r.ctx, cq)).To(gomega.Succeed())
	lq := &kueue.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name},
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(name)},
	}
	gomega.Expect(r.env.Client.Create(r.ctx, lq)).To(gomega.Succeed())
	gomega.Eventually(func(g gomega.Gomega) {
		var got kueue.ClusterQueue
		g.Expect(r.env.Client.Get(r.ctx, client.ObjectKeyFromObject(cq), &got)).To(gomega.Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, kueue.ClusterQueueActive)).To(gomega.BeTrue())
	}, timeout, interval).Should(gomega.Succeed())
}

type jobOption func(*batchv1.Job)

func priority(class string) jobOption {
	return func(j *batchv1.Job) { j.Labels[constants.WorkloadPriorityClassLabel] = class }
}

// pods sets the pod count and, when min > 0, allows partial admission down to min.
func pods(n, min int32) jobOption {
	return func(j *batchv1.Job) {
		j.Spec.Parallelism, j.Spec.Completions = ptr.To(n), ptr.To(n)
		if min > 0 {
			j.Annotations = map[string]string{jobcontroller.JobMinParallelismAnnotation: fmt.Sprint(min)}
		}
	}
}

// job creates a suspended Job with one pod requesting cpu, queued in queue.
func (r *run) job(name, queue, cpu string, opts ...jobOption) {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name, Labels: map[string]string{constants.QueueLabel: queue}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1),
			Completions: ptr.To[int32](1),
			Suspend:     ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name:      "main",
					Image:     "busybox",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
				}},
			}},
		},
	}
	for _, o := range opts {
		o(j)
	}
	gomega.Expect(r.env.Client.Create(r.ctx, j)).To(gomega.Succeed())
	r.jobs = append(r.jobs, name)
	// Wait for the Workload, so that creation order is queue order.
	gomega.Eventually(func(g gomega.Gomega) { r.workload(g, name) }, timeout, interval).Should(gomega.Succeed())
}

func (r *run) deleteJob(name string) {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}}
	gomega.Expect(r.env.Client.Delete(r.ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(gomega.Succeed())
	r.jobs = slices.DeleteFunc(r.jobs, func(s string) bool { return s == name })
}

// workload returns the Workload the job controller made for a Job. key is the Job's name for
// its first Workload; "name#n" is the n-th slice of an elastic Job (see slices).
func (r *run) workload(g gomega.Gomega, key string) *kueue.Workload {
	jobName, n := splitSliceKey(key)
	var list kueue.WorkloadList
	g.Expect(r.env.Client.List(r.ctx, &list, client.InNamespace(r.ns))).To(gomega.Succeed())
	chain := slicesOf(list.Items, jobName)
	if len(chain) == 0 {
		chain = standalone(list.Items, jobName)
	}
	g.Expect(len(chain)).To(gomega.BeNumerically(">=", n), "workload %s", key)
	return chain[n-1]
}

// standalone returns the Workload named name that no object owns (see podSetsWorkload).
func standalone(items []kueue.Workload, name string) []*kueue.Workload {
	for i := range items {
		if items[i].Name == name && len(items[i].OwnerReferences) == 0 {
			return []*kueue.Workload{&items[i]}
		}
	}
	return nil
}

// splitSliceKey parses "name#n" into name and n; a plain name is slice 1.
func splitSliceKey(key string) (string, int) {
	name, nth, found := strings.Cut(key, "#")
	if !found {
		return name, 1
	}
	n, err := strconv.Atoi(nth)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "slice key %s", key)
	return name, n
}

// slicesOf returns the Workloads of the named Job in slice order: the first one replaces no
// other, and each next one is the replacement of the one before. Workloads outside the chain
// come last, by name. A Job that is not elastic has one Workload.
func slicesOf(items []kueue.Workload, jobName string) []*kueue.Workload {
	var owned []*kueue.Workload
	for i := range items {
		for _, ref := range items[i].OwnerReferences {
			if ref.Kind == "Job" && ref.Name == jobName {
				owned = append(owned, &items[i])
				break
			}
		}
	}
	slices.SortFunc(owned, func(a, b *kueue.Workload) int { return strings.Compare(a.Name, b.Name) })
	var chain []*kueue.Workload
	var prev *kueue.Workload
	for len(owned) > 0 {
		i := slices.IndexFunc(owned, func(wl *kueue.Workload) bool {
			replaced := workloadslicing.ReplacementForKey(wl)
			if prev == nil {
				return replaced == nil
			}
			return replaced != nil && *replaced == workload.Key(prev)
		})
		if i < 0 {
			break
		}
		prev = owned[i]
		chain = append(chain, prev)
		owned = slices.Delete(owned, i, i+1)
	}
	return append(chain, owned...)
}

// jobOutcome is what the comparison looks at for one Job's Workload.
type jobOutcome struct {
	Admitted bool
	// QuotaReserved is "reason: message" of the condition, or "" without one.
	QuotaReserved string
	// Evicted and Preempted are the reasons of those conditions while true.
	Evicted   string
	Preempted string
	Active    bool
	// Counts are the admitted pod counts per pod set.
	Counts []int32
	// Finished is the reason of the Finished condition while true (a replaced slice).
	Finished string
	// Topology is the admitted topology assignment of each pod set that has one.
	Topology []string
	// Checks are the Workload's admission checks as "name=state", by name.
	Checks []string
}

var (
	uidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// Workload names carry a hash of the Job's UID.
	wlNamePattern = regexp.MustCompile(`job-([a-z0-9-]+?)-[a-z0-9]{5}\b`)
)

// normalize removes what differs between two control planes for the same scenario.
func normalize(msg string) string {
	return wlNamePattern.ReplaceAllString(uidPattern.ReplaceAllString(msg, "<uid>"), "job-$1")
}

func summarize(wl *kueue.Workload) jobOutcome {
	o := jobOutcome{
		Admitted: apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted),
		Active:   ptr.Deref(wl.Spec.Active, true),
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
		o.QuotaReserved = c.Reason + ": " + normalize(c.Message)
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
		o.Evicted = c.Reason
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); c != nil && c.Status == metav1.ConditionTrue {
		o.Preempted = c.Reason
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue {
		o.Finished = c.Reason
	}
	for _, ac := range wl.Status.AdmissionChecks {
		o.Checks = append(o.Checks, string(ac.Name)+"="+string(ac.State))
	}
	slices.Sort(o.Checks)
	if o.Admitted && wl.Status.Admission != nil {
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			o.Counts = append(o.Counts, ptr.Deref(psa.Count, 0))
			if psa.TopologyAssignment != nil {
				o.Topology = append(o.Topology, string(psa.Name)+": "+formatTopology(psa.TopologyAssignment))
			}
		}
	}
	return o
}

// formatTopology writes a topology assignment as its levels and each domain with its pod
// count, e.g. "[kubernetes.io/hostname] h1=2 h2=1". It is decoded and its domains sorted, so
// that two encodings of the same placement compare equal, and a string, so that outcomes
// print by value.
func formatTopology(ta *kueue.TopologyAssignment) string {
	var domains []string
	for d := range tasutil.InternalSeqFrom(ta) {
		domains = append(domains, fmt.Sprintf("%s=%d", strings.Join(d.Values, "/"), d.Count))
	}
	slices.Sort(domains)
	return fmt.Sprintf("%v %s", ta.Levels, strings.Join(domains, " "))
}

// want is the expected state of one Job: nil fields are not checked.
type want struct {
	admitted  *bool
	reason    string // QuotaReserved reason, when set
	message   string // substring of the QuotaReserved message, when set
	evicted   string
	preempted string
	active    *bool
	counts    []int32
	finished  string   // Finished reason, when set
	checks    []string // admission checks as "name=state", when set
	// racyMessage leaves the QuotaReserved message out of the recorded outcome: upstream
	// leaves either of two messages, depending on whether its informer saw its own last
	// write before the next cycle (the condition is computed on the queued copy).
	racyMessage bool
	// racyReason leaves the QuotaReserved condition out altogether: upstream's reason alternates
	// with its flavor scan while its queue retries the head, and the state is taken at any moment.
	racyReason bool
}

var (
	admitted = want{admitted: ptr.To(true)}
	pending  = want{admitted: ptr.To(false)}
)

func (w want) withReason(reason string) want   { w.reason = reason; return w }
func (w want) withMessage(msg string) want     { w.message = msg; return w }
func (w want) preemptedBy(reason string) want  { w.evicted, w.preempted = "Preempted", reason; return w }
func (w want) withCounts(c ...int32) want      { w.counts = c; return w }
func (w want) withRacyMessage() want           { w.racyMessage = true; return w }
func (w want) withRacyReason() want            { w.racyReason = true; return w }
func (w want) withFinished(reason string) want { w.finished = reason; return w }
func (w want) withChecks(c ...string) want     { w.checks = c; return w }

// record is what the comparison keeps of wl.
func (w want) record(wl *kueue.Workload) jobOutcome {
	o := summarize(wl)
	if w.racyMessage {
		o.QuotaReserved, _, _ = strings.Cut(o.QuotaReserved, ":")
	}
	if w.racyReason {
		o.QuotaReserved = ""
	}
	return o
}

func (w want) check(g gomega.Gomega, name string, wl *kueue.Workload) {
	got := summarize(wl)
	if w.admitted != nil {
		g.Expect(got.Admitted).To(gomega.Equal(*w.admitted), "%s admitted; conditions: %v", name, wl.Status.Conditions)
	}
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	if w.reason != "" {
		g.Expect(c).NotTo(gomega.BeNil(), "%s QuotaReserved condition", name)
		g.Expect(c.Reason).To(gomega.Equal(w.reason), "%s QuotaReserved reason", name)
	}
	if w.message != "" {
		g.Expect(c).NotTo(gomega.BeNil(), "%s QuotaReserved condition", name)
		g.Expect(c.Message).To(gomega.ContainSubstring(w.message), "%s QuotaReserved message", name)
	}
	if w.evicted != "" {
		g.Expect(got.Evicted).To(gomega.Equal(w.evicted), "%s Evicted reason", name)
	}
	if w.preempted != "" {
		g.Expect(got.Preempted).To(gomega.Equal(w.preempted), "%s Preempted reason", name)
	}
	if w.active != nil {
		g.Expect(got.Active).To(gomega.Equal(*w.active), "%s active", name)
	}
	if w.counts != nil {
		g.Expect(got.Counts).To(gomega.Equal(w.counts), "%s admitted counts", name)
	}
	if w.finished != "" {
		g.Expect(got.Finished).To(gomega.Equal(w.finished), "%s Finished reason", name)
	}
	if w.checks != nil {
		g.Expect(got.Checks).To(gomega.Equal(w.checks), "%s admission checks", name)
	}
}

// expect waits until every named Job is as wanted, then until the outcome of all the
// run's Jobs has held for a moment, and records it under step.
func (r *run) expect(step string, wants map[string]want) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		for name, w := range wants {
			w.check(g, name, r.workload(g, name))
		}
	}, timeout, interval).Should(gomega.Succeed())
	var last map[string]jobOutcome
	gomega.Eventually(func(g gomega.Gomega) {
		now := map[string]jobOutcome{}
		for _, name := range r.jobs {
			wl := r.workload(g, name)
			w := wants[name]
			w.check(g, name, wl)
			now[name] = w.record(wl)
		}
		stable := last != nil && fmt.Sprint(now) == fmt.Sprint(last)
		last = now
		g.Expect(stable).To(gomega.BeTrue(), "outcome still changing")
	}, timeout, settle).Should(gomega.Succeed())
	for name, o := range last {
		r.result.States[step+"/"+name] = o
	}
}

// see waits until the named Jobs are as wanted and records them as they are then, for
// states that do not last.
func (r *run) see(step string, wants map[string]want) {
	ginkgo.GinkgoHelper()
	seen := map[string]jobOutcome{}
	gomega.Eventually(func(g gomega.Gomega) {
		for name, w := range wants {
			wl := r.workload(g, name)
			w.check(g, name, wl)
			seen[name] = w.record(wl)
		}
	}, timeout, interval).Should(gomega.Succeed())
	for name, o := range seen {
		r.result.States[step+"/"+name] = o
	}
}

// holds checks for a while that the named Jobs stay as wanted.
func (r *run) holds(d time.Duration, wants map[string]want) {
	ginkgo.GinkgoHelper()
	gomega.Consistently(func(g gomega.Gomega) {
		for name, w := range wants {
			w.check(g, name, r.workload(g, name))
		}
	}, d, interval).Should(gomega.Succeed())
}
