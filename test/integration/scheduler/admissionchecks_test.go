package scheduler_test

import (
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Helpers for two-phase admission: AdmissionChecks that no controller serves, whose states
// the scenario sets itself in the Workloads' status, as the check's controller would.

// admissionCheck creates an AdmissionCheck for a controller that does not run, and marks it
// Active in its status: a ClusterQueue that lists an inactive check is not active.
func (r *run) admissionCheck(name string) {
	ginkgo.GinkgoHelper()
	ac := &kueue.AdmissionCheck{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kueue.AdmissionCheckSpec{ControllerName: "parity.example.com/set-by-the-test"},
	}
	gomega.Expect(r.env.Client.Create(r.ctx, ac)).To(gomega.Succeed())
	gomega.Eventually(func(g gomega.Gomega) {
		var got kueue.AdmissionCheck
		g.Expect(r.env.Client.Get(r.ctx, client.ObjectKeyFromObject(ac), &got)).To(gomega.Succeed())
		apimeta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{
			Type:    kueue.AdmissionCheckActive,
			Status:  metav1.ConditionTrue,
			Reason:  "Active",
			Message: "set by the test",
		})
		g.Expect(r.env.Client.Status().Update(r.ctx, &got)).To(gomega.Succeed())
	}, timeout, interval).Should(gomega.Succeed())
}

// withCheck makes every flavor of the ClusterQueue require the named AdmissionCheck.
func withCheck(name string) cqOption {
	return func(cq *kueue.ClusterQueue) {
		cq.Spec.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{
			AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: kueue.AdmissionCheckReference(name)}},
		}
	}
}

// setCheck sets the state of the named check of a Job's Workload, which Kueue has added to
// its status.
func (r *run) setCheck(job, check string, state kueue.CheckState) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		wl := r.workload(g, job)
		i := -1
		for j := range wl.Status.AdmissionChecks {
			if string(wl.Status.AdmissionChecks[j].Name) == check {
				i = j
			}
		}
		g.Expect(i).NotTo(gomega.Equal(-1), "check %s of %s", check, job)
		ac := &wl.Status.AdmissionChecks[i]
		if ac.State != state {
			ac.State = state
			ac.LastTransitionTime = metav1.Now()
		}
		ac.Message = "set to " + string(state) + " by the test"
		g.Expect(r.env.Client.Status().Update(r.ctx, wl)).To(gomega.Succeed())
	}, timeout, interval).Should(gomega.Succeed())
}

// Two-phase admission. A Job's quota is reserved first, and it is admitted once the
// ClusterQueue's AdmissionCheck is Ready for it. A check in Retry evicts the Job and releases
// its quota, which lets a waiting Job in; the evicted one goes back to the queue, behind it.
// A check in Rejected deactivates the Job.
//
// The ClusterQueue is StrictFIFO so that the waiting Job stays in the queue's heap. Under
// BestEffortFIFO it is set aside as inadmissible, and upstream's scheduler may reserve the
// evicted Job again, requeued at once with its check reset to Pending, before the released
// quota brings the waiting one back.
func admissionChecks(r *run) {
	const check = "admission-checks-manual"
	state := func(s kueue.CheckState) string { return check + "=" + string(s) }
	r.admissionCheck(check)
	r.clusterQueue("admission-checks", "4", withCheck(check), strictFIFO)
	reserved := pending.withReason(kueue.WorkloadQuotaReserved).withChecks(state(kueue.CheckStatePending))
	ready := admitted.withChecks(state(kueue.CheckStateReady))

	r.job("first", "admission-checks", "1")
	r.expect("first reserved, check pending", map[string]want{"first": reserved})
	r.setCheck("first", check, kueue.CheckStateReady)
	r.expect("first admitted", map[string]want{"first": ready})

	r.job("retried", "admission-checks", "1")
	r.expect("retried reserved", map[string]want{"first": ready, "retried": reserved})
	r.job("waiting", "admission-checks", "3")
	r.expect("waiting for quota", map[string]want{
		"first":   ready,
		"retried": reserved,
		"waiting": pending.withReason(kueue.WorkloadQuotaReservedReasonWaitingForQuota),
	})

	r.setCheck("retried", check, kueue.CheckStateRetry)
	evicted := pending.withReason(kueue.WorkloadQuotaReservedReasonWaitingForQuota)
	evicted.evicted = kueue.WorkloadEvictedByAdmissionCheck
	r.expect("retried evicted, waiting in", map[string]want{
		"first":   ready,
		"retried": evicted.withChecks(state(kueue.CheckStatePending)),
		"waiting": reserved,
	})

	r.setCheck("waiting", check, kueue.CheckStateRejected)
	deactivated := pending
	deactivated.active = ptr.To(false)
	r.expect("waiting rejected, retried in", map[string]want{
		"first":   ready,
		"retried": reserved,
		"waiting": deactivated,
	})

	r.setCheck("retried", check, kueue.CheckStateReady)
	r.expect("retried admitted", map[string]want{"first": ready, "retried": ready, "waiting": deactivated})
}
