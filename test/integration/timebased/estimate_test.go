package timebased_test

import (
	"context"
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

var _ = ginkgo.Describe("Visibility API estimates", func() {
	ctx := context.Background()

	ginkgo.It("annotates each pending workload with when its turn comes", func() {
		const window = 5 * time.Minute
		ns := timeSharingQueue(ctx, "estimate", "est", "5m", "BestEffortFIFO")
		api, err := visibilityclient.NewForConfig(env.VisibilityConfig)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var jobs []*batchv1.Job
		for i := range 3 {
			j := job(ns, "est", fmt.Sprintf("job-%d", i))
			gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
			jobs = append(jobs, j)
		}
		gomega.Eventually(func(g gomega.Gomega) { soleHolder(g, ctx, jobs) }, timeout, interval).Should(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			// Estimates are kept a few seconds by the manager's clock: move it past them.
			clk.Step(6 * time.Second)
			now := clk.Now()
			list, err := api.VisibilityV1beta2().LocalQueues(ns).GetPendingWorkloadsSummary(ctx, "est", metav1.GetOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(list.Items).To(gomega.HaveLen(2))
			var prev time.Time
			for i, w := range list.Items {
				g.Expect(w.Annotations[annotations.AdmissionEstimate]).To(gomega.ContainSubstring("expected around"), "item %d", i)
				at, err := time.Parse(time.RFC3339, w.Annotations[annotations.EstimatedAdmission])
				g.Expect(err).NotTo(gomega.HaveOccurred(), "item %d", i)
				// Each takes the next turn: the holder's window, then the first's.
				g.Expect(at).To(gomega.BeTemporally(">", prev.Add(window-time.Minute)), "item %d", i)
				g.Expect(at).To(gomega.BeTemporally("<=", now.Add(time.Duration(i+1)*(window+2*time.Second))), "item %d", i)
				prev = at
			}
		}, timeout, interval).Should(gomega.Succeed())
	})
})

var _ = ginkgo.Describe("Admission estimate error", ginkgo.Ordered, func() {
	ctx := context.Background()

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		err := env.Client.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "est-high"}, Value: 1000})
		if !apierrors.IsAlreadyExists(err) {
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
		}
	})

	// startWaiting runs a holder and a waiting job in a new five-minute time-sharing ClusterQueue,
	// and lets the manager's refresh (every 5s by its clock) estimate the waiting one, as nobody
	// reads the visibility API. It returns the holder's admission. The jobs' Pods have no grace
	// period: the estimate counts it, and here no Pod runs to take it.
	startWaiting := func(cq string) (ns string, holder, waiting *batchv1.Job, admitted time.Time) {
		ginkgo.GinkgoHelper()
		ns = timeSharingQueue(ctx, cq, "lq", "5m", "BestEffortFIFO")
		holder, waiting = noGrace(job(ns, "lq", "holder")), noGrace(job(ns, "lq", "waiting"))
		gomega.Expect(env.Client.Create(ctx, holder)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, holder)).To(gomega.BeTrue())
			c := apimeta.FindStatusCondition(workloadOf(g, ctx, holder).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(gomega.BeNil())
			admitted = c.LastTransitionTime.Time
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, waiting)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(workloadOf(g, ctx, waiting).Status.Conditions).NotTo(gomega.BeEmpty())
		}, timeout, interval).Should(gomega.Succeed())
		clk.Step(6 * time.Second)
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, waiting)).To(gomega.BeFalse())
		}, 2*time.Second, interval).Should(gomega.Succeed())
		return ns, holder, waiting, admitted
	}

	ginkgo.It("measures a waiting workload admitted as estimated within one scheduling step plus the handover", func() {
		_, holder, waiting, admitted := startWaiting("est-error")
		// The holder's window ends 5m after its admission; the clock steps 1s past it.
		clk.Step(admitted.Add(5*time.Minute + time.Second).Sub(clk.Now()))
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, waiting)).To(gomega.BeTrue())
			g.Expect(unsuspended(g, ctx, holder)).To(gomega.BeFalse())
			late, early := estimateErrors(g, "est-error", "late"), estimateErrors(g, "est-error", "early")
			g.Expect(late.count+early.count).To(gomega.Equal(uint64(1)), "one admission was estimated")
			// One step of the test's clock plus the estimate's handover.
			g.Expect(late.sum + early.sum).To(gomega.BeNumerically("<=", 2))
			ginkgo.GinkgoWriter.Printf("estimate error: late %v (%d), early %v (%d)\n", late.sum, late.count, early.sum, early.count)
		}, timeout, interval).Should(gomega.Succeed())
		// The holder was admitted at once, before any estimate.
		gomega.Expect(withoutEstimate("est-error", "none")).To(gomega.Equal(1.0))
	})

	ginkgo.It("reports the drift an arrival causes: a higher priority that takes the quota delays the estimated workload", func() {
		ns, holder, waiting, admitted := startWaiting("est-drift")
		// The holder's window, then the handover.
		estimated := admitted.Add(5*time.Minute + time.Second)
		ginkgo.By("a higher priority arriving a minute into the holder's turn, which it preempts, and running five minutes")
		clk.Step(admitted.Add(time.Minute).Sub(clk.Now()))
		urgent := noGrace(job(ns, "lq", "urgent"))
		urgent.Labels[constants.WorkloadPriorityClassLabel] = "est-high"
		gomega.Expect(env.Client.Create(ctx, urgent)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, urgent)).To(gomega.BeTrue())
			g.Expect(unsuspended(g, ctx, holder)).To(gomega.BeFalse())
		}, timeout, interval).Should(gomega.Succeed())
		clk.Step(5 * time.Minute)
		complete(ctx, urgent)
		ginkgo.By("admitting the waiting workload next, or after the holder's new turn")
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, waiting) || unsuspended(g, ctx, holder)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
		if unsuspended(gomega.Default, ctx, holder) {
			c := apimeta.FindStatusCondition(workloadOf(gomega.Default, ctx, holder).Status.Conditions, kueue.WorkloadQuotaReserved)
			gomega.Expect(c).NotTo(gomega.BeNil())
			clk.Step(c.LastTransitionTime.Add(5*time.Minute + time.Second).Sub(clk.Now()))
		}
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, waiting)).To(gomega.BeTrue())
			c := apimeta.FindStatusCondition(workloadOf(g, ctx, waiting).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(gomega.BeNil())
			drift := c.LastTransitionTime.Sub(estimated)
			g.Expect(drift).To(gomega.BeNumerically(">=", 50*time.Second), "the arrival delays it")
			late := estimateErrors(g, "est-drift", "late")
			g.Expect(late.count).To(gomega.Equal(uint64(1)))
			g.Expect(estimateErrors(g, "est-drift", "early").count).To(gomega.BeZero())
			g.Expect(late.sum).To(gomega.BeNumerically("~", drift.Seconds(), 2))
			ginkgo.GinkgoWriter.Printf("estimate drift: late %v (%d), admitted %v after the estimate\n", late.sum, late.count, drift)
		}, timeout, interval).Should(gomega.Succeed())
	})
})

// noGrace gives j's Pods no termination grace period.
func noGrace(j *batchv1.Job) *batchv1.Job {
	j.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	return j
}

// histogramSeries is one series of a histogram: its number of samples and their sum.
type histogramSeries struct {
	count uint64
	sum   float64
}

// series is the series of the metric name whose labels include want, nil if none.
func series(g gomega.Gomega, name string, want map[string]string) *dto.Metric {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(labelsOf(m), want) {
				return m
			}
		}
	}
	return nil
}

// labelsOf is m's labels by name.
func labelsOf(m *dto.Metric) map[string]string {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// estimateErrors reads kueue_admission_estimate_error_seconds of cq and direction.
func estimateErrors(g gomega.Gomega, cq, direction string) histogramSeries {
	m := series(g, "kueue_admission_estimate_error_seconds", map[string]string{"cluster_queue": cq, "direction": direction})
	return histogramSeries{count: m.GetHistogram().GetSampleCount(), sum: m.GetHistogram().GetSampleSum()}
}

// withoutEstimate is kueue_admissions_without_estimate_total of cq and estimate.
func withoutEstimate(cq, estimate string) float64 {
	return series(gomega.Default, "kueue_admissions_without_estimate_total", map[string]string{"cluster_queue": cq, "estimate": estimate}).GetCounter().GetValue()
}

// complete reports j as finished, as the Job controller would once its pod succeeded.
func complete(ctx context.Context, j *batchv1.Job) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		util.CompleteJob(g, ctx, env.Client, j)
	}, timeout, interval).Should(gomega.Succeed())
}
