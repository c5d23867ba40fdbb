package reliability_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
)

var _ = ginkgo.Describe("Two managers with leader election, the leader killed with SIGKILL", ginkgo.Ordered, func() {
	ctx := context.Background()
	// Short durations so that a handover takes seconds; the renew deadline leaves a loaded
	// machine some slack before a healthy leader gives up.
	le := &controlplane.LeaderElection{Namespace: managerNamespace, LeaseDuration: 5 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second}
	// The lease expires LeaseDuration after the dead leader's last renewal; a follower tries
	// every RetryPeriod plus up to 120% jitter (client-go); three seconds more for the API
	// server's and this test's polling latency on a loaded machine (make test runs packages in
	// parallel on two cores).
	handoverBound := le.LeaseDuration + le.RetryPeriod*22/10 + 3*time.Second

	var (
		k *cluster
		h *history
	)
	ginkgo.BeforeAll(func() {
		k = startCluster()
		h = watchHistory(k.cp.Config)
	})

	holder := func(g gomega.Gomega) string {
		var lease coordinationv1.Lease
		g.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: le.Namespace, Name: configapi.DefaultLeaderElectionID}, &lease)).To(gomega.Succeed())
		return ptr.Deref(lease.Spec.HolderIdentity, "")
	}
	acquired := func(p *managerProcess) bool {
		_, err := leaseIndex(p.entries())
		return err == nil
	}

	ginkgo.It("admits and preempts only from the leader, hands over within the lease, and evicts nobody twice", func() {
		rng := rand.New(rand.NewPCG(seed, 2))
		jobs, handovers := 30, 2
		if long {
			// Enough Jobs that every new leader has admissions to make.
			jobs, handovers = 300, 20
		}
		leader, procs := k.startReady("leader-0", le)
		gomega.Eventually(func() bool { return acquired(leader) }, timeout, interval).Should(gomega.BeTrue(), "the first manager leads")
		var leaderID string
		gomega.Eventually(func(g gomega.Gomega) { leaderID = holder(g); g.Expect(leaderID).NotTo(gomega.BeEmpty()) }, timeout, interval).Should(gomega.Succeed())
		follower, started := k.startReady("leader-1", le)
		procs = append(procs, started...)

		createBaseObjects(ctx, k.client)
		ns := "leader"
		pol, queues := allPolicies(ctx, k.client, ns)
		dumpOnFailure(k.client, ns)
		s := startStream(k.client, ns, drawJobs(rng, jobs, queues))

		var takeovers []time.Duration
		for i := range handovers {
			ginkgo.By(fmt.Sprintf("handover %d/%d: killing the leader %s just after a preemption (or an admission)", i+1, handovers, leader.name))
			preempted, admitted := h.next(eventPreemption), h.next(eventAdmission)
			select {
			case <-preempted:
			case <-time.After(15 * time.Second):
				<-admitted
			}
			gomega.Expect(acquired(follower)).To(gomega.BeFalse(), "%s took the lease while %s held it", follower.name, leader.name)
			leader.kill()
			gomega.Eventually(func(g gomega.Gomega) {
				id := holder(g)
				g.Expect(id).NotTo(gomega.Equal(leaderID), "the dead leader still holds the lease")
				leaderID = id
			}, handoverBound, 100*time.Millisecond).Should(gomega.Succeed(), "the follower takes over within the lease duration and retry periods (%s)", handoverBound)
			took := time.Since(leader.killedAt)
			takeovers = append(takeovers, took)
			gomega.Eventually(func() bool { return acquired(follower) }, timeout, interval).Should(gomega.BeTrue(), "%s says it leads", follower.name)

			ginkgo.By(fmt.Sprintf("admitting again from the new leader %s (took over after %s)", follower.name, took.Round(100*time.Millisecond)))
			gomega.Eventually(func() int { return count(follower.entries(), msgAdmitted) }, timeout, interval).Should(gomega.BeNumerically(">", 0))

			next, started := k.startReady(fmt.Sprintf("leader-%d", i+2), le)
			procs = append(procs, started...)
			leader, follower = follower, next
		}
		gomega.Eventually(s.done, 3*timeout).Should(gomega.BeClosed())
		s.stop()

		ginkgo.By("checking that only a manager holding the lease admitted or preempted")
		admissions := 0
		for _, p := range procs {
			entries := p.entries()
			first, err := leaseIndex(entries)
			if err != nil {
				first = len(entries)
			}
			for _, e := range entries[:first] {
				gomega.Expect(e.Msg).NotTo(gomega.BeElementOf(msgAdmitted, msgPreempted), "%s before it held the lease: %s", p.name, e.raw)
			}
			admissions += count(entries, msgAdmitted)
		}

		ginkgo.By("checking that everything settles, and the history")
		st := expectSettled(ctx, k.client, ns, queues)
		logged := preemptionsLogged(procs)
		gomega.Expect(h.violations(pol, logged)).To(gomega.BeEmpty())

		report("leader election: %d Jobs, %d handovers, lease %s / renew %s / retry %s; takeovers after the kill: %v (bound %s)",
			jobs, handovers, le.LeaseDuration, le.RenewDeadline, le.RetryPeriod, roundAll(takeovers), handoverBound)
		report("leader election: %s; %d admissions and %d evictions logged by leaders, none by a follower", h.summary(), admissions, total(logged))
		report("leader election: settled with %d finished, %d admitted, %d pending (%d parked untried)", st.finished, st.admitted, st.pending, st.parked)

		ginkgo.By("checking that no manager logged a token, password or key")
		k.expectNoSecrets(procs)

		ginkgo.By("draining: every Job runs and finishes")
		drain(ctx, k.client, ns)
	})
})

func count(entries []logEntry, msg string) int {
	n := 0
	for _, e := range entries {
		if e.Msg == msg {
			n++
		}
	}
	return n
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond)
	}
	return out
}
