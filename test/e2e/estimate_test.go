package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

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

// compareEstimates checks each estimate against the Job's first admission in ts (its QuotaReserved
// time), after reporting them all, within estimateTolerance per handover before it.
func compareEstimates(reads []estimateRead, ts []turn) {
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
		var drains time.Duration
		for _, t := range ts[r.turn+1 : i+1] {
			drains += t.reserved.Sub(t.evictedPrev)
		}
		handovers := i - r.turn
		c := check{job: r.job, err: admitted.Sub(r.eta), tolerance: time.Duration(handovers) * estimateTolerance, estimated: r.eta, admission: admitted}
		checks = append(checks, c)
		fmt.Fprintf(&b, "%s (read %s, turn %d): estimate %s (%q), admitted %s: error %v (tolerance ±%v); %d handover(s), eviction to admission %v in all\n",
			r.job, r.readAt.Format("15:04:05"), r.turn+1, r.eta.Format("15:04:05"), r.sentence, admitted.Format("15:04:05"),
			c.err, c.tolerance, handovers, drains)
	}
	ginkgo.GinkgoWriter.Print(b.String())
	ginkgo.AddReportEntry("admission estimates against admissions (10 s grace)", b.String())
	for _, c := range checks {
		gomega.Expect(c.err).To(gomega.BeNumerically("~", 0, c.tolerance), "%s's estimate %s against its admission %s:\n%s", c.job, c.estimated, c.admission, b.String())
	}
}
