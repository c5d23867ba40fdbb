package notice_test

import (
	"context"
	"encoding/json"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

var _ = ginkgo.Describe("A notice before eviction", func() {
	ctx := context.Background()

	ginkgo.It("is shown on the Workload and its running Pods, survives a restart, and ends early once the Job says checkpoint-done", func() {
		ns := queue(ctx, "in-force")
		victim := running(ctx, ns, "victim")
		_, pre := pending(ctx, ns, "preemptor")
		live, done := pods(ctx, victim, 2)
		wl, n := giveNotice(ctx, victim, pre, 10*time.Minute)
		key := client.ObjectKeyFromObject(wl)
		deadline := n.Deadline.UTC().Format(time.RFC3339)

		ginkgo.By("keeping the manager's record: the condition True with the deadline and the preemptor")
		var since metav1.Time
		gomega.Eventually(func(g gomega.Gomega) {
			c, _ := noticeCondition(g, ctx, key)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(gomega.Equal("InClusterQueueTimeBased"))
			g.Expect(c.Message).To(gomega.ContainSubstring("To be evicted at " + deadline))
			g.Expect(c.Message).To(gomega.ContainSubstring(ns + "/" + pre.Name))
			since = c.LastTransitionTime
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("telling the running Pods the deadline, and not the finished one")
		gomega.Eventually(func(g gomega.Gomega) {
			for _, p := range live {
				g.Expect(deadlineOn(g, ctx, p)).To(gomega.Equal(deadline))
			}
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(deadlineOn(gomega.Default, ctx, done)).To(gomega.BeEmpty())

		ginkgo.By("telling a Pod the Job starts during the notice")
		late, _ := pods(ctx, victim, 1)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(deadlineOn(g, ctx, late[0])).To(gomega.Equal(deadline))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("keeping the notice, without telling it again, across a restart")
		gomega.Expect(env.RestartManager()).To(gomega.Succeed())
		gomega.Consistently(func(g gomega.Gomega) {
			c, got := noticeCondition(g, ctx, key)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
			g.Expect(c.LastTransitionTime).To(gomega.Equal(since))
			g.Expect(got.Annotations).To(gomega.HaveKey(annotations.PreemptionNotice))
			g.Expect(eventsFor(g, ctx, ns, wl.Name, "InvalidPreemptionNotice")).To(gomega.BeEmpty())
		}, 3*time.Second, interval).Should(gomega.Succeed())
		ginkgo.By("copying checkpoint-done from the Job to the Workload")
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotations.CheckpointDone: "true"}}})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(env.Client.Patch(ctx, victim, client.RawPatch(types.MergePatchType, body))).To(gomega.Succeed())
		// Copied, the notice is due: the waiting preemptor evicts the victim at once.
		gomega.Eventually(func(g gomega.Gomega) {
			c, got := noticeCondition(g, ctx, key)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(gomega.Equal("EndedEarly"))
			g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, kueue.WorkloadEvicted)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("removing checkpoint-done from the Job, so that it does not end the next notice at once")
		gomega.Eventually(func(g gomega.Gomega) {
			var j batchv1.Job
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(victim), &j)).To(gomega.Succeed())
			g.Expect(j.Annotations).NotTo(gomega.HaveKey(annotations.CheckpointDone))
			var got kueue.Workload
			g.Expect(env.Client.Get(ctx, key, &got)).To(gomega.Succeed())
			g.Expect(got.Annotations).NotTo(gomega.HaveKey(annotations.CheckpointDone))
		}, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("is withdrawn when its preemptor is deleted: the victim keeps running, told so once", func() {
		ns := queue(ctx, "withdrawn")
		victim := running(ctx, ns, "victim")
		preJob, pre := pending(ctx, ns, "preemptor")
		live, _ := pods(ctx, victim, 1)
		wl, n := giveNotice(ctx, victim, pre, 10*time.Minute)
		key := client.ObjectKeyFromObject(wl)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(deadlineOn(g, ctx, live[0])).To(gomega.Equal(n.Deadline.UTC().Format(time.RFC3339)))
		}, timeout, interval).Should(gomega.Succeed())
		before := noticesTotal(ns, "Withdrawn")

		deleteIgnoringMissing(ctx, preJob)
		deleteIgnoringMissing(ctx, pre)

		ginkgo.By("setting the condition False, Withdrawn, and removing the annotations")
		gomega.Eventually(func(g gomega.Gomega) {
			c, got := noticeCondition(g, ctx, key)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(gomega.Equal("Withdrawn"))
			g.Expect(got.Annotations).NotTo(gomega.HaveKey(annotations.PreemptionNotice))
			g.Expect(got.Annotations).NotTo(gomega.HaveKey(annotations.PreemptionDeadline))
			g.Expect(deadlineOn(g, ctx, live[0])).To(gomega.BeEmpty())
			g.Expect(eventsFor(g, ctx, ns, wl.Name, "PreemptionNoticeWithdrawn")).To(gomega.HaveLen(1))
			g.Expect(eventsFor(g, ctx, ns, victim.Name, "PreemptionNoticeWithdrawn")).To(gomega.HaveLen(1))
			g.Expect(noticesTotal(ns, "Withdrawn")).To(gomega.Equal(before + 1))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("counting it once, and leaving the victim running")
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(noticesTotal(ns, "Withdrawn")).To(gomega.Equal(before + 1))
			g.Expect(util.Unsuspended(g, ctx, env.Client, victim)).To(gomega.BeTrue())
		}, 2*time.Second, interval).Should(gomega.Succeed())

		ginkgo.By("withdrawing, and counting once, a later notice for a preemptor already gone")
		clk.Step(time.Minute)
		giveNotice(ctx, victim, pre, 10*time.Minute)
		gomega.Eventually(func(g gomega.Gomega) {
			c, got := noticeCondition(g, ctx, key)
			g.Expect(c.Reason).To(gomega.Equal("Withdrawn"))
			g.Expect(c.LastTransitionTime.Time).To(gomega.BeTemporally(">=", clk.Now()))
			g.Expect(got.Annotations).NotTo(gomega.HaveKey(annotations.PreemptionNotice))
			g.Expect(noticesTotal(ns, "Withdrawn")).To(gomega.Equal(before + 2))
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Consistently(func() float64 { return noticesTotal(ns, "Withdrawn") }, 2*time.Second, interval).Should(gomega.Equal(before + 2))
	})

	ginkgo.It("is withdrawn when room appears and its preemptor is admitted without the eviction", func() {
		ns := queue(ctx, "room")
		victim := running(ctx, ns, "victim")
		_, pre := pending(ctx, ns, "preemptor")
		wl, _ := giveNotice(ctx, victim, pre, 10*time.Minute)
		key := client.ObjectKeyFromObject(wl)
		gomega.Eventually(func(g gomega.Gomega) {
			c, _ := noticeCondition(g, ctx, key)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("giving the ClusterQueue a second cpu")
		gomega.Eventually(func(g gomega.Gomega) {
			var cq kueue.ClusterQueue
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, &cq)).To(gomega.Succeed())
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("2")
			g.Expect(env.Client.Update(ctx, &cq)).To(gomega.Succeed())
		}, timeout, interval).Should(gomega.Succeed())

		gomega.Eventually(func(g gomega.Gomega) {
			c, got := noticeCondition(g, ctx, key)
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(gomega.Equal("Withdrawn"))
			g.Expect(c.Message).To(gomega.ContainSubstring("admitted without this eviction"))
			g.Expect(got.Annotations).NotTo(gomega.HaveKey(annotations.PreemptionNotice))
			g.Expect(util.Unsuspended(g, ctx, env.Client, victim)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("ends early when the victim finishes before its deadline", func() {
		ns := queue(ctx, "ended-early")
		victim := running(ctx, ns, "victim")
		_, pre := pending(ctx, ns, "preemptor")
		wl, _ := giveNotice(ctx, victim, pre, 10*time.Minute)
		key := client.ObjectKeyFromObject(wl)
		gomega.Eventually(func(g gomega.Gomega) {
			c, _ := noticeCondition(g, ctx, key)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
		}, timeout, interval).Should(gomega.Succeed())
		before := noticesTotal(ns, "EndedEarly")

		gomega.Eventually(func(g gomega.Gomega) {
			var latest kueue.Workload
			g.Expect(env.Client.Get(ctx, key, &latest)).To(gomega.Succeed())
			apimeta.SetStatusCondition(&latest.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "finished by the test"})
			g.Expect(env.Client.Status().Update(ctx, &latest)).To(gomega.Succeed())
		}, timeout, interval).Should(gomega.Succeed())

		gomega.Eventually(func(g gomega.Gomega) {
			c, got := noticeCondition(g, ctx, key)
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(gomega.Equal("EndedEarly"))
			g.Expect(got.Annotations).NotTo(gomega.HaveKey(annotations.PreemptionNotice))
			g.Expect(eventsFor(g, ctx, ns, wl.Name, "PreemptionNoticeEnded")).To(gomega.HaveLen(1))
			g.Expect(noticesTotal(ns, "EndedEarly")).To(gomega.Equal(before + 1))
		}, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("removes an unreadable notice and warns once", func() {
		ns := queue(ctx, "unreadable")
		victim := running(ctx, ns, "victim")
		var wl *kueue.Workload
		gomega.Eventually(func(g gomega.Gomega) { wl = util.WorkloadOf(g, ctx, env.Client, victim) }, timeout, interval).Should(gomega.Succeed())
		body := []byte(`{"metadata":{"annotations":{"kueue-timeshare.io/preemption-notice":"{not json","kueue-timeshare.io/preemption-deadline":"soon"}}}`)
		gomega.Expect(env.Client.Patch(ctx, wl, client.RawPatch(types.MergePatchType, body))).To(gomega.Succeed())
		expectRemovedWithOneWarning(ctx, ns, wl, annotations.PreemptionNotice)
	})

	ginkgo.It("removes a well-formed notice the manager never recorded, tells no Pod, counts nothing and warns once", func() {
		ns := queue(ctx, "forged")
		victim := running(ctx, ns, "victim")
		_, pre := pending(ctx, ns, "preemptor")
		live, _ := pods(ctx, victim, 1)
		var wl *kueue.Workload
		gomega.Eventually(func(g gomega.Gomega) { wl = util.WorkloadOf(g, ctx, env.Client, victim) }, timeout, interval).Should(gomega.Succeed())
		counted := noticesTotal(ns, "EvictedAtDeadline") + noticesTotal(ns, "EndedEarly") + noticesTotal(ns, "Withdrawn")
		// What a tenant past the webhook could write: a notice for 2099, for a pending workload.
		n := annotations.Notice{Start: clk.Now(), Deadline: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), Reason: "InClusterQueueTimeBased",
			Preemptor: ns + "/" + pre.Name, PreemptorUID: pre.UID}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": n.Annotations()}})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(env.Client.Patch(ctx, wl, client.RawPatch(types.MergePatchType, body))).To(gomega.Succeed())
		expectRemovedWithOneWarning(ctx, ns, wl, "not a notice the manager gave")
		expectNoMoreWrites(ctx, client.ObjectKeyFromObject(wl))
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(deadlineOn(g, ctx, live[0])).To(gomega.BeEmpty())
			g.Expect(noticesTotal(ns, "EvictedAtDeadline") + noticesTotal(ns, "EndedEarly") + noticesTotal(ns, "Withdrawn")).To(gomega.Equal(counted))
		}, 2*time.Second, interval).Should(gomega.Succeed())
	})

	ginkgo.It("restores a notice whose annotations were changed from its record, and warns once", func() {
		ns := queue(ctx, "moved")
		victim := running(ctx, ns, "victim")
		_, pre := pending(ctx, ns, "preemptor")
		wl, n := giveNotice(ctx, victim, pre, 10*time.Minute)
		moved := n
		moved.Deadline = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": moved.Annotations()}})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(env.Client.Patch(ctx, wl, client.RawPatch(types.MergePatchType, body))).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			_, got := noticeCondition(g, ctx, client.ObjectKeyFromObject(wl))
			g.Expect(got.Annotations).To(gomega.HaveKeyWithValue(annotations.PreemptionDeadline, n.Deadline.UTC().Format(time.RFC3339)))
			es := eventsFor(g, ctx, ns, wl.Name, "InvalidPreemptionNotice")
			g.Expect(es).To(gomega.HaveLen(1))
			g.Expect(es[0].Note).To(gomega.ContainSubstring("restored from the PreemptionNotice condition"))
		}, timeout, interval).Should(gomega.Succeed())
		expectNoMoreWrites(ctx, client.ObjectKeyFromObject(wl))
	})
})

// expectNoMoreWrites checks that the manager, having answered a forgery, writes the Workload no
// more: its resourceVersion stays put (a controller fighting the forgery would bump it).
func expectNoMoreWrites(ctx context.Context, key client.ObjectKey) {
	ginkgo.GinkgoHelper()
	var wl kueue.Workload
	gomega.Expect(env.Client.Get(ctx, key, &wl)).To(gomega.Succeed())
	rv := wl.ResourceVersion
	gomega.Consistently(func(g gomega.Gomega) {
		var now kueue.Workload
		g.Expect(env.Client.Get(ctx, key, &now)).To(gomega.Succeed())
		g.Expect(now.ResourceVersion).To(gomega.Equal(rv), "the manager wrote the Workload again")
	}, 3*time.Second, interval).Should(gomega.Succeed())
}

// expectRemovedWithOneWarning waits for the notice annotations to leave wl, with one Warning event
// whose note contains problem, and checks that no notice condition was set True from them.
func expectRemovedWithOneWarning(ctx context.Context, ns string, wl *kueue.Workload, problem string) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		es := eventsFor(g, ctx, ns, wl.Name, "InvalidPreemptionNotice")
		g.Expect(es).To(gomega.HaveLen(1))
		g.Expect(es[0].Type).To(gomega.Equal(corev1.EventTypeWarning))
		g.Expect(es[0].Note).To(gomega.ContainSubstring(problem))
		_, got := noticeCondition(g, ctx, client.ObjectKeyFromObject(wl))
		g.Expect(got.Annotations).NotTo(gomega.HaveKey(annotations.PreemptionNotice))
		g.Expect(got.Annotations).NotTo(gomega.HaveKey(annotations.PreemptionDeadline))
	}, timeout, interval).Should(gomega.Succeed())
	gomega.Consistently(func(g gomega.Gomega) {
		g.Expect(eventsFor(g, ctx, ns, wl.Name, "InvalidPreemptionNotice")).To(gomega.HaveLen(1))
	}, 2*time.Second, interval).Should(gomega.Succeed())
}

var _ = ginkgo.Describe("A notice the preemptor ended with an eviction", func() {
	ctx := context.Background()

	ginkgo.It("has its annotations removed from the Workload and the Pods, and is not counted again", func() {
		ns := queue(ctx, "evicted")
		victim := running(ctx, ns, "victim")
		_, pre := pending(ctx, ns, "preemptor")
		live, _ := pods(ctx, victim, 1)
		wl, n := giveNotice(ctx, victim, pre, 10*time.Minute)
		key := client.ObjectKeyFromObject(wl)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(deadlineOn(g, ctx, live[0])).To(gomega.Equal(n.Deadline.UTC().Format(time.RFC3339)))
		}, timeout, interval).Should(gomega.Succeed())
		counted := noticesTotal(ns, "EvictedAtDeadline") + noticesTotal(ns, "EndedEarly") + noticesTotal(ns, "Withdrawn")

		ginkgo.By("writing the condition False as the preemptor does in its eviction")
		clk.Step(10 * time.Minute)
		gomega.Eventually(func(g gomega.Gomega) {
			var latest kueue.Workload
			g.Expect(env.Client.Get(ctx, key, &latest)).To(gomega.Succeed())
			apimeta.SetStatusCondition(&latest.Status.Conditions, metav1.Condition{Type: "PreemptionNotice", Status: metav1.ConditionFalse,
				Reason: "EvictedAtDeadline", Message: "evicted at the deadline", LastTransitionTime: metav1.NewTime(clk.Now())})
			g.Expect(env.Client.Status().Update(ctx, &latest)).To(gomega.Succeed())
		}, timeout, interval).Should(gomega.Succeed())

		gomega.Eventually(func(g gomega.Gomega) {
			c, got := noticeCondition(g, ctx, key)
			g.Expect(c.Reason).To(gomega.Equal("EvictedAtDeadline"))
			g.Expect(got.Annotations).NotTo(gomega.HaveKey(annotations.PreemptionNotice))
			g.Expect(got.Annotations).NotTo(gomega.HaveKey(annotations.PreemptionDeadline))
			g.Expect(deadlineOn(g, ctx, live[0])).To(gomega.BeEmpty())
		}, timeout, interval).Should(gomega.Succeed())
		// The manager's own preemptor may take the due notice before the write above: its
		// eviction counts the notice once, and nothing counts it again.
		var latest kueue.Workload
		gomega.Expect(env.Client.Get(ctx, key, &latest)).To(gomega.Succeed())
		want := counted
		if notice.PreemptedFor(&latest, &n) {
			want++
		}
		gomega.Consistently(func() float64 {
			return noticesTotal(ns, "EvictedAtDeadline") + noticesTotal(ns, "EndedEarly") + noticesTotal(ns, "Withdrawn")
		}, 2*time.Second, interval).Should(gomega.Equal(want))
	})
})
