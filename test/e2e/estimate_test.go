package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
)

// withVisibility restarts the manager serving the visibility API, as the chart's does, until the
// spec ends; the other specs run without it.
func withVisibility() {
	ginkgo.GinkgoHelper()
	addr, err := controlplane.FreeLoopbackAddress()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	visibilityAddress = addr
	reconfigureManager(defaultManagerExtra)
	ginkgo.DeferCleanup(func() {
		visibilityAddress = ""
		reconfigureManager(defaultManagerExtra)
	})
}

// estimateRead is a waiting Job's admission estimate as a user reads it (its LocalQueue's
// pendingworkloads), during the turn of index turn.
type estimateRead struct {
	job      string
	turn     int
	readAt   time.Time
	eta      time.Time
	sentence string
}

// readEstimates waits until the visibility API gives each of jobs, waiting in the LocalQueue lq,
// an estimated time, and returns them.
func readEstimates(ctx context.Context, lq string, turn int, jobs ...*batchv1.Job) []estimateRead {
	ginkgo.GinkgoHelper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Host = "https://" + visibilityAddress
	cfg.CAData, cfg.CAFile = cp.ServingCA(), ""
	vis, err := visibilityclient.NewForConfig(cfg)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var out []estimateRead
	gomega.Eventually(func(g gomega.Gomega) {
		out = nil
		s, err := vis.VisibilityV1beta2().LocalQueues(jobs[0].Namespace).GetPendingWorkloadsSummary(ctx, lq, metav1.GetOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		for _, j := range jobs {
			name := workload(g, ctx, j).Name
			found := false
			for _, p := range s.Items {
				if p.Name != name {
					continue
				}
				found = true
				v := p.Annotations[annotations.EstimatedAdmission]
				g.Expect(v).NotTo(gomega.Equal(annotations.EstimateUnknown), "%s: %s", j.Name, p.Annotations[annotations.AdmissionEstimate])
				at, err := time.Parse(time.RFC3339, v)
				g.Expect(err).NotTo(gomega.HaveOccurred(), "%s's estimate", j.Name)
				out = append(out, estimateRead{job: j.Name, turn: turn, readAt: time.Now(), eta: at, sentence: p.Annotations[annotations.AdmissionEstimate]})
			}
			g.Expect(found).To(gomega.BeTrue(), "%s is listed as pending", j.Name)
		}
	}, 30*time.Second, interval).Should(gomega.Succeed())
	return out
}

// estimateTolerance is what one handover may add to an estimate's error: the waker ends a turn at
// its sweep after the window's end (every second), the Evicted and QuotaReserved times are stored
// to the second, and the victim's Pods may stop a moment before or after their grace period,
// which the estimate counts (HandoverAfterVictimTermination) with one second for the cycle.
const estimateTolerance = 2 * time.Second

// estimateServedFor is how long the manager serves a ClusterQueue's estimates while its pending
// list is unchanged (its estimateTTL).
const estimateServedFor = 5 * time.Second

// compareEstimates checks each estimate against the Job's first admission in ts (its QuotaReserved
// time), after reporting them all, within estimateTolerance per handover before it; what the
// victims' Pods took past grace, their grace period, to stop is taken off the admission first.
func compareEstimates(reads []estimateRead, ts []turn, grace time.Duration) {
	ginkgo.GinkgoHelper()
	var b strings.Builder
	type check struct {
		job                  string
		err, tolerance       time.Duration
		estimated, admission time.Time
	}
	var checks []check
	for _, r := range reads {
		i := -1
		for k, t := range ts {
			if k > r.turn && t.holder == r.job {
				i = k
				break
			}
		}
		gomega.Expect(i).NotTo(gomega.Equal(-1), "%s was admitted after its estimate was read", r.job)
		admitted := ts[i].reserved
		var drains, overrun time.Duration
		for _, t := range ts[r.turn+1 : i+1] {
			drains += t.reserved.Sub(t.evictedPrev)
			// The estimate counts the victims' grace period; Pods that take longer than that to
			// stop (on a busy machine) delay the admission by what no estimate can know.
			if !t.prevGone.IsZero() {
				overrun += max(t.prevGone.Sub(t.evictedPrev)-grace-time.Second, 0)
			}
		}
		handovers := i - r.turn
		c := check{job: r.job, err: admitted.Add(-overrun).Sub(r.eta), tolerance: time.Duration(handovers) * estimateTolerance, estimated: r.eta, admission: admitted}
		checks = append(checks, c)
		fmt.Fprintf(&b, "%s (read %s, turn %d): estimate %s (%q), admitted %s: error %v (tolerance ±%v); %d handover(s), eviction to admission %v in all, Pods stopping %v past their grace period (not held against the estimate)\n",
			r.job, r.readAt.Format("15:04:05"), r.turn+1, r.eta.Format("15:04:05"), r.sentence, admitted.Format("15:04:05"),
			c.err, c.tolerance, handovers, drains, overrun)
	}
	ginkgo.GinkgoWriter.Print(b.String())
	ginkgo.AddReportEntry("admission estimates against admissions (10 s grace)", b.String())
	for _, c := range checks {
		gomega.Expect(c.err).To(gomega.BeNumerically("~", 0, c.tolerance), "%s's estimate %s against its admission %s:\n%s", c.job, c.estimated, c.admission, b.String())
	}
}

var _ = ginkgo.Describe("admission estimates in a cohort with Pods", func() {
	ginkgo.It("estimates when a borrower its lender reclaimed from runs again: when the lender's Job ends", func() {
		ctx := context.Background()
		withVisibility()
		ns := newNamespace(ctx, "cohort")
		cohort := "estimates-" + ns
		clusterQueueIn(ctx, ns, "est-lender", "2", cohort, map[string]any{"reclaimWithinCohort": "Any"})
		clusterQueueIn(ctx, ns, "est-borrower", "2", cohort, map[string]any{"reclaimWithinCohort": "Never"})

		ginkgo.By("running a borrower's Job of 4 CPUs: its own 2 and the lender's 2")
		borrower := newJob(ns, jobSpec{name: "borrower", queue: "est-borrower", cpu: "4", grace: 10})
		submit(ctx, borrower)
		admittedAt(ctx, borrower)
		expectRunning(ctx, borrower, time.Minute)

		ginkgo.By("reclaiming the lender's 2 CPUs for a Job that declares, and runs, one minute")
		lender := newJob(ns, jobSpec{name: "lender", queue: "est-lender", cpu: "2", runtime: "1m",
			annotations: map[string]string{annotations.ExpectedRuntime: "1m"}})
		submit(ctx, lender)
		lenderReserved, _ := admittedAt(ctx, lender)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(holding(workload(g, ctx, borrower))).To(gomega.BeFalse(), "the borrower was reclaimed from")
		}, time.Minute, interval).Should(gomega.Succeed())

		ginkgo.By("reading the borrower's estimate from its LocalQueue once the lender's Pod is ready")
		// Its minute counts from its Pod's readiness, as its run does. The manager serves a
		// ClusterQueue's estimates for up to estimateTTL (5 s) while its pending list is unchanged,
		// so the read waits that long after the readiness for an estimate made since.
		expectRunning(ctx, lender, time.Minute)
		time.Sleep(time.Until(readyAt(ctx, lender).Add(estimateServedFor + time.Second)))
		reads := readEstimates(ctx, "est-borrower", 0, borrower)

		ginkgo.By("admitting the borrower again when the lender's Job ends")
		var admitted time.Time
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workload(g, ctx, borrower)
			g.Expect(holding(wl)).To(gomega.BeTrue())
			admitted = apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved).LastTransitionTime.Time
		}, 2*time.Minute, interval).Should(gomega.Succeed())
		report := fmt.Sprintf("lender reserved %s; borrower's estimate %s (%q), read %s; admitted %s: error %v (tolerance ±%v)",
			lenderReserved.Format("15:04:05"), reads[0].eta.Format("15:04:05"), reads[0].sentence, reads[0].readAt.Format("15:04:05"),
			admitted.Format("15:04:05"), admitted.Sub(reads[0].eta), estimateTolerance)
		ginkgo.GinkgoWriter.Println(report)
		ginkgo.AddReportEntry("a reclaimed borrower's estimate against its admission", report)
		gomega.Expect(admitted.Sub(reads[0].eta)).To(gomega.BeNumerically("~", 0, estimateTolerance), report)
	})
})
