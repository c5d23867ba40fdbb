package protection_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

const (
	// Ample: CI runs the suites side by side on a busy machine; Eventually returns once it holds.
	timeout  = 90 * time.Second
	interval = 200 * time.Millisecond
)

var (
	env *util.Env
	// clk drives our scheduler: protections end when the test says so.
	clk *clocktesting.FakeClock
)

func TestProtection(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "Min-runtime protection and preemption toleration suite")
}

var _ = ginkgo.BeforeSuite(func() {
	log := util.SuiteLogger(ginkgo.GinkgoWriter)
	clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	stop := make(chan struct{})
	ginkgo.DeferCleanup(func() { close(stop) })
	util.FireDue(clk, 100*time.Millisecond, stop)
	var err error
	// Kueue's custom metric labels, so that our metrics are seen to carry them as Kueue's do.
	env, err = util.Start(util.Settings{Log: log, Clock: clk,
		FeatureGates: map[string]bool{"CustomMetricLabels": true, "PreemptionBudget": true},
		MetricsExtra: "  customLabels:\n  - name: team\n    sourceKind: ClusterQueue\n"})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ctx := context.Background()
	gomega.Expect(env.Client.Create(ctx, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}})).To(gomega.Succeed())
	for name, value := range map[string]int32{"low": 10, "high": 100} {
		gomega.Expect(env.Client.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value})).To(gomega.Succeed())
	}
})

// The manager stamps conditions by clk and the API server creation times by the real clock: keep
// clk ahead, as it would be if both were real.
var _ = ginkgo.BeforeEach(func() { util.KeepAhead(clk) })

var _ = ginkgo.AfterSuite(func() {
	if env != nil {
		gomega.Expect(env.Stop()).To(gomega.Succeed())
	}
})

// clusterQueue creates a ClusterQueue with cpu of default-flavor in cohort (none if empty), with
// spec.preemption set to preemption, and a LocalQueue of the same name in ns.
func clusterQueue(ctx context.Context, ns, name, cpu, cohort string, preemption map[string]any) {
	ginkgo.GinkgoHelper()
	gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns, name, cpu, cohort, preemption)).To(gomega.Succeed())
}

// cohort creates a Cohort under parent (a root if empty) with spec.preemption set to preemption.
func cohort(ctx context.Context, name, parent string, preemption map[string]any) {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("Cohort"))
	u.SetName(name)
	if parent != "" {
		gomega.Expect(unstructured.SetNestedField(u.Object, parent, "spec", "parentName")).To(gomega.Succeed())
	}
	if preemption != nil {
		gomega.Expect(unstructured.SetNestedField(u.Object, preemption, "spec", "preemption")).To(gomega.Succeed())
	}
	gomega.Expect(env.Client.Create(ctx, u)).To(gomega.Succeed())
}

func namespace(ctx context.Context, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	gomega.Expect(env.Client.Create(ctx, ns)).To(gomega.Succeed())
	return ns.Name
}

// job asks for cpu in the LocalQueue lq, at the WorkloadPriorityClass priority ("" for none).
func job(ns, lq, name, cpu, priority string) *batchv1.Job {
	j := util.CPUJob(ns, name, lq, cpu)
	if priority != "" {
		j.Labels[constants.WorkloadPriorityClassLabel] = priority
	}
	return j
}

func submit(ctx context.Context, j *batchv1.Job) {
	ginkgo.GinkgoHelper()
	gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
}

func unsuspended(g gomega.Gomega, ctx context.Context, j *batchv1.Job) bool {
	return util.Unsuspended(g, ctx, env.Client, j)
}

func workloadOf(g gomega.Gomega, ctx context.Context, j *batchv1.Job) *kueue.Workload {
	return util.WorkloadOf(g, ctx, env.Client, j)
}

// admittedAt waits until j runs and returns its Admitted condition's time.
func admittedAt(ctx context.Context, j *batchv1.Job) time.Time {
	ginkgo.GinkgoHelper()
	var at time.Time
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(unsuspended(g, ctx, j)).To(gomega.BeTrue())
		c := apimeta.FindStatusCondition(workloadOf(g, ctx, j).Status.Conditions, kueue.WorkloadAdmitted)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
		at = c.LastTransitionTime.Time
	}, timeout, interval).Should(gomega.Succeed())
	return at
}

// expectPendingWith waits until j's QuotaReserved message contains each of parts.
func expectPendingWith(ctx context.Context, j *batchv1.Job, parts ...string) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		c := apimeta.FindStatusCondition(workloadOf(g, ctx, j).Status.Conditions, kueue.WorkloadQuotaReserved)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
		for _, p := range parts {
			g.Expect(c.Message).To(gomega.ContainSubstring(p))
		}
	}, timeout, interval).Should(gomega.Succeed())
}

// expectHeld checks for a while that running keeps running and waiting keeps waiting.
func expectHeld(ctx context.Context, running, waiting *batchv1.Job) {
	ginkgo.GinkgoHelper()
	gomega.Consistently(func(g gomega.Gomega) {
		g.Expect(unsuspended(g, ctx, running)).To(gomega.BeTrue())
		g.Expect(unsuspended(g, ctx, waiting)).To(gomega.BeFalse())
	}, 2*time.Second, interval).Should(gomega.Succeed())
}

// expectPreempted waits until victim is preempted with reason and winner runs.
func expectPreempted(ctx context.Context, victim, winner *batchv1.Job, reason string) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		c := apimeta.FindStatusCondition(workloadOf(g, ctx, victim).Status.Conditions, kueue.WorkloadPreempted)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(gomega.Equal(reason))
		g.Expect(unsuspended(g, ctx, winner)).To(gomega.BeTrue())
		g.Expect(unsuspended(g, ctx, victim)).To(gomega.BeFalse())
	}, timeout, interval).Should(gomega.Succeed())
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// protectedTotal reads kueue_preemption_protected_candidates_total for cq and kind.
func protectedTotal(cq, kind string) float64 {
	for _, s := range seriesOf("kueue_preemption_protected_candidates_total") {
		if s.labels["cluster_queue"] == cq && s.labels["kind"] == kind {
			return s.value
		}
	}
	return 0
}

type series struct {
	labels map[string]string
	value  float64
}

// seriesOf reads every series of the counter or gauge name from the manager's registry.
func seriesOf(name string) []series {
	families, err := ctrlmetrics.Registry.Gather()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var out []series
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			s := series{labels: map[string]string{}, value: m.GetCounter().GetValue() + m.GetGauge().GetValue()}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			out = append(out, s)
		}
	}
	return out
}
