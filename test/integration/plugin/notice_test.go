package plugin_test

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/cmd/kubectl-timeshare/app"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

var _ = ginkgo.Describe("kubectl timeshare on a preemption notice in progress", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string
	var low, high *batchv1.Job
	var lowWL, highWL *kueue.Workload
	var given *annotations.Notice

	explainJSON := func(g gomega.Gomega, name string) app.ExplainReport {
		code, out, errOut := run("explain", "workload", name, "-n", ns, "-o", "json")
		g.Expect(code).To(gomega.Equal(0), errOut)
		var r app.ExplainReport
		g.Expect(json.Unmarshal([]byte(out), &r)).To(gomega.Succeed(), out)
		return r
	}

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		ns = namespace(ctx, "notice")
		// The period comes from the Cohort, the extension to priority preemption from the ClusterQueue.
		cohort(ctx, "labs", "", map[string]any{"noticePeriod": "3m"})
		gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns, "noticed", "1", "labs", map[string]any{
			"withinClusterQueue": "LowerPriority", "noticeOnPriorityPreemption": true})).To(gomega.Succeed())
		low, high = job(ns, "noticed", "low", "1", "low"), job(ns, "noticed", "high", "1", "high")
		gomega.Expect(env.Client.Create(ctx, low)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, low)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, high)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			lowWL, highWL = workloadOf(g, ctx, low), workloadOf(g, ctx, high)
			var err error
			given, err = annotations.ParseNotice(lowWL.Annotations)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(given).NotTo(gomega.BeNil(), "the low-priority workload is given notice")
			g.Expect(condition(g, lowWL, notice.Condition).Status).To(gomega.Equal(metav1.ConditionTrue))
		}, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("shows the notice settings where they come from, and the notice on the workload holding the quota", func() {
		var got app.ClusterQueueReport
		gomega.Eventually(func(g gomega.Gomega) {
			r := queuesJSON(g, "noticed")
			g.Expect(r.ClusterQueues).To(gomega.HaveLen(1))
			got = r.ClusterQueues[0]
			g.Expect(got.Pending).To(gomega.HaveLen(1))
			g.Expect(got.Pending[0].Message).To(gomega.ContainSubstring("waiting for the preemption notice of 1 workload(s)"))
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(cmp.Diff([]app.SettingReport{
			{Name: "noticePeriod", Value: "3m0s", Source: "Cohort labs"},
			{Name: "noticeOnPriorityPreemption", Value: "true", Source: "ClusterQueue noticed"},
			{Name: "noticeOnReclaim", Value: "false", Source: "not set on ClusterQueue noticed or a Cohort above it"},
		}, got.Settings[3:])).To(gomega.BeEmpty())
		gomega.Expect(got.Admitted).To(gomega.HaveLen(1))
		gomega.Expect(got.Admitted[0].Name).To(gomega.Equal(lowWL.Name))
		want := &app.NoticeInProgress{Given: &metav1.Time{Time: given.Start}, Deadline: &metav1.Time{Time: given.Deadline},
			Reason: kueue.InClusterQueueReason, Preemptor: ns + "/" + highWL.Name}
		gomega.Expect(cmp.Diff(want, noticeDetails[app.NoticeInProgress](gomega.Default, got.Admitted[0].Details))).To(gomega.BeEmpty())
		gomega.Expect(given.Deadline.Sub(given.Start)).To(gomega.BeNumerically(">=", 3*time.Minute))

		ginkgo.By("printing the same in tables")
		code, out, errOut := run("queues", "noticed")
		gomega.Expect(code).To(gomega.Equal(0), errOut)
		ginkgo.GinkgoWriter.Println(out)
		expectLine(out, "noticePeriod", "3m0s", "Cohort labs")
		expectLine(out, "noticeOnPriorityPreemption", "true", "ClusterQueue noticed")
		expectLine(out, ns+"/"+lowWL.Name, "until "+rfc3339(given.Deadline), "for "+ns+"/"+highWL.Name+" ("+kueue.InClusterQueueReason+")")
		expectLine(out, ns+"/"+highWL.Name, "waiting for the preemption notice of 1 workload(s) ("+ns+"/"+lowWL.Name+")")
	})

	ginkgo.It("explains both sides: the victim's deadline and the workloads the preemptor waits on", func() {
		victim := explainJSON(gomega.Default, lowWL.Name)
		gomega.Expect(victim.State).To(gomega.Equal("holding quota in ClusterQueue noticed, under preemption notice until " + rfc3339(given.Deadline)))
		victimNotice := noticeDetails[app.NoticeReport](gomega.Default, victim.Details)
		gomega.Expect(victimNotice).NotTo(gomega.BeNil())
		gomega.Expect(victimNotice.Notice).NotTo(gomega.BeNil())
		gomega.Expect(victimNotice.Notice.Deadline.Time).To(gomega.BeTemporally("==", given.Deadline))
		gomega.Expect(victimNotice.State).NotTo(gomega.BeNil())
		gomega.Expect(victimNotice.State.Status).To(gomega.Equal("True"))
		gomega.Expect(victim.History).To(gomega.ContainElement(gomega.And(
			gomega.HaveField("Source", "event"), gomega.HaveField("Reason", "PreemptionNotice"))), "the manager's event on the victim")

		var preemptor app.ExplainReport
		gomega.Eventually(func(g gomega.Gomega) {
			preemptor = explainJSON(g, highWL.Name)
			g.Expect(preemptor.Wait).NotTo(gomega.BeNil())
			g.Expect(preemptor.Wait.Message).To(gomega.ContainSubstring("waiting for the preemption notice"))
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(cmp.Diff([]app.NoticeInProgress{{Workload: ns + "/" + lowWL.Name, Given: &metav1.Time{Time: given.Start},
			Deadline: &metav1.Time{Time: given.Deadline}, Reason: kueue.InClusterQueueReason, Preemptor: ns + "/" + highWL.Name}},
			noticeDetails[app.NoticeReport](gomega.Default, preemptor.Details).NoticedForIt)).To(gomega.BeEmpty())

		code, out, errOut := run("explain", "workload", lowWL.Name, "-n", ns)
		gomega.Expect(code).To(gomega.Equal(0), errOut)
		ginkgo.GinkgoWriter.Println(out)
		expectLine(out, "Under preemption notice (given", "reason "+kueue.InClusterQueueReason)
		expectLine(out, "evicted at "+rfc3339(given.Deadline), "to make room for "+ns+"/"+highWL.Name, "checkpoint not yet done")
		code, out, errOut = run("explain", "workload", highWL.Name, "-n", ns)
		gomega.Expect(code).To(gomega.Equal(0), errOut)
		ginkgo.GinkgoWriter.Println(out)
		expectLine(out, "Workloads under notice to make room for it:")
		expectLine(out, ns+"/"+lowWL.Name, rfc3339(given.Deadline), kueue.InClusterQueueReason, "not done")
	})

	ginkgo.It("explains how the notice ended once the deadline came", func() {
		clk.SetTime(given.Deadline)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, high)).To(gomega.BeTrue())
			r := explainJSON(g, lowWL.Name)
			nr := noticeDetails[app.NoticeReport](g, r.Details)
			g.Expect(nr).NotTo(gomega.BeNil())
			g.Expect(nr.Notice).To(gomega.BeNil(), "the notice annotations are gone")
			g.Expect(nr.State).NotTo(gomega.BeNil())
			g.Expect(nr.State.Status).To(gomega.Equal("False"))
			g.Expect(nr.State.Reason).To(gomega.Equal(string(notice.EvictedAtDeadline)))
			g.Expect(r.LastPreemption).NotTo(gomega.BeNil())
			g.Expect(r.LastPreemption.Reason).To(gomega.Equal(kueue.InClusterQueueReason))
		}, timeout, interval).Should(gomega.Succeed())
		code, out, errOut := run("explain", "workload", lowWL.Name, "-n", ns)
		gomega.Expect(code).To(gomega.Equal(0), errOut)
		ginkgo.GinkgoWriter.Println(out)
		expectLine(out, "Its last preemption notice (PreemptionNotice=False, reason "+string(notice.EvictedAtDeadline))
		r := queuesJSON(gomega.Default, "noticed")
		for _, a := range r.ClusterQueues[0].Admitted {
			gomega.Expect(noticeDetails[app.NoticeInProgress](gomega.Default, a.Details)).To(gomega.BeNil(), "no notice in force on %s", a.Name)
		}
	})
})

// noticeDetails is what a report decoded from JSON says under details.PreemptionNotice, as a T;
// nil when it says nothing.
func noticeDetails[T any](g gomega.Gomega, details map[string]any) *T {
	d, ok := details["PreemptionNotice"]
	if !ok {
		return nil
	}
	data, err := json.Marshal(d)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	v := new(T)
	g.Expect(json.Unmarshal(data, v)).To(gomega.Succeed())
	return v
}
