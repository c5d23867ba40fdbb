package notice_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

const (
	// Ample: CI runs the suites side by side on a busy machine; Eventually returns once it holds.
	timeout  = 90 * time.Second
	interval = 200 * time.Millisecond
)

var (
	env *util.Env
	// clk is the manager's clock: a notice's deadline comes when the test says so.
	clk *clocktesting.FakeClock
)

func TestNotice(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "Preemption notice suite")
}

var _ = ginkgo.BeforeSuite(func() {
	log := util.SuiteLogger(ginkgo.GinkgoWriter)
	clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	stop := make(chan struct{})
	ginkgo.DeferCleanup(func() { close(stop) })
	util.FireDue(clk, 100*time.Millisecond, stop)
	var err error
	env, err = util.Start(util.Settings{Log: log, Clock: clk, FeatureGates: map[string]bool{"PreemptionNotice": true}})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(env.Client.Create(context.Background(), &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}})).To(gomega.Succeed())
})

// The manager stamps conditions by clk and the API server creation times by the real clock: keep
// clk ahead, as it would be if both were real.
var _ = ginkgo.BeforeEach(func() { util.KeepAhead(clk) })

var _ = ginkgo.AfterSuite(func() {
	if env != nil {
		gomega.Expect(env.Stop()).To(gomega.Succeed())
	}
})

// queue creates a namespace with a ClusterQueue of one cpu (no preemption: nothing but the test
// gives or ends a notice's eviction) and a LocalQueue of the same name.
func queue(ctx context.Context, prefix string) string {
	ginkgo.GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	gomega.Expect(env.Client.Create(ctx, ns)).To(gomega.Succeed())
	gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns.Name, ns.Name, "1", "", nil)).To(gomega.Succeed())
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "default"}}
	gomega.Expect(env.Client.Create(ctx, sa)).To(gomega.Succeed())
	return ns.Name
}

// running submits a one-cpu Job and waits until it is admitted.
func running(ctx context.Context, ns, name string) *batchv1.Job {
	ginkgo.GinkgoHelper()
	j := util.CPUJob(ns, name, ns, "1")
	gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(util.Unsuspended(g, ctx, env.Client, j)).To(gomega.BeTrue())
	}, timeout, interval).Should(gomega.Succeed())
	return j
}

// pending submits a one-cpu Job that waits for the room the running one holds, and returns its
// Workload.
func pending(ctx context.Context, ns, name string) (*batchv1.Job, *kueue.Workload) {
	ginkgo.GinkgoHelper()
	j := util.CPUJob(ns, name, ns, "1")
	gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
	var wl *kueue.Workload
	gomega.Eventually(func(g gomega.Gomega) {
		wl = util.WorkloadOf(g, ctx, env.Client, j)
		c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
	}, timeout, interval).Should(gomega.Succeed())
	return j, wl
}

// pods creates the Pods the job controller would for j: n running, and one Succeeded.
func pods(ctx context.Context, j *batchv1.Job, n int) (live []*corev1.Pod, done *corev1.Pod) {
	ginkgo.GinkgoHelper()
	var obj batchv1.Job
	gomega.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(j), &obj)).To(gomega.Succeed())
	create := func() *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, GenerateName: j.Name + "-",
				Labels: map[string]string{batchv1.ControllerUidLabel: string(obj.UID)}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "pause"}}},
		}
		gomega.Expect(env.Client.Create(ctx, p)).To(gomega.Succeed())
		return p
	}
	for range n {
		live = append(live, create())
	}
	done = create()
	// The manager may annotate the Pod as soon as it exists: read it again on a conflict.
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(done), done)).To(gomega.Succeed())
		done.Status.Phase = corev1.PodSucceeded
		g.Expect(env.Client.Status().Update(ctx, done)).To(gomega.Succeed())
	}, timeout, interval).Should(gomega.Succeed())
	return live, done
}

// giveNotice writes on victim's Workload what the preemptor writes when it gives a notice.
func giveNotice(ctx context.Context, victim *batchv1.Job, preemptor *kueue.Workload, period time.Duration) (*kueue.Workload, annotations.Notice) {
	ginkgo.GinkgoHelper()
	var wl *kueue.Workload
	gomega.Eventually(func(g gomega.Gomega) { wl = util.WorkloadOf(g, ctx, env.Client, victim) }, timeout, interval).Should(gomega.Succeed())
	now := clk.Now()
	n := annotations.Notice{Start: now, Deadline: now.Add(period), Reason: "InClusterQueueTimeBased",
		Preemptor: preemptor.Namespace + "/" + preemptor.Name, PreemptorUID: preemptor.UID}
	// As the preemptor gives it: the record in the status first, then the annotations.
	gomega.Expect(notice.ApplyCondition(ctx, env.Client, wl, notice.ConditionOf(&n, wl.Generation))).To(gomega.Succeed())
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": n.Annotations()}})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(env.Client.Patch(ctx, wl, client.RawPatch(types.MergePatchType, body))).To(gomega.Succeed())
	return wl, n
}

// noticeCondition reads the PreemptionNotice condition of the Workload key.
func noticeCondition(g gomega.Gomega, ctx context.Context, key types.NamespacedName) (*metav1.Condition, *kueue.Workload) {
	var wl kueue.Workload
	g.Expect(env.Client.Get(ctx, key, &wl)).To(gomega.Succeed())
	return apimeta.FindStatusCondition(wl.Status.Conditions, "PreemptionNotice"), &wl
}

// deadlineOn reads the deadline annotation of pod ("" without it).
func deadlineOn(g gomega.Gomega, ctx context.Context, pod *corev1.Pod) string {
	var p corev1.Pod
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(gomega.Succeed())
	return p.Annotations[annotations.PreemptionDeadline]
}

// eventsFor are the events with reason about the object named name in ns.
func eventsFor(g gomega.Gomega, ctx context.Context, ns, name, reason string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(gomega.Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// noticesTotal reads kueue_preemption_notices_total for cq and outcome.
func noticesTotal(cq, outcome string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != "kueue_preemption_notices_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cluster_queue"] == cq && labels["outcome"] == outcome {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func deleteIgnoringMissing(ctx context.Context, obj client.Object) {
	ginkgo.GinkgoHelper()
	err := env.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if !apierrors.IsNotFound(err) {
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
}
