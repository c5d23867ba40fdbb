package scheduler_test

import (
	"fmt"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// scenario runs in a namespace of its own, named after it, with ClusterQueues prefixed by
// it, so scenarios sharing an environment do not meet.
type scenario struct {
	name string
	run  func(r *run)
}

// profile is a manager configuration and the scenarios run under it.
type profile struct {
	name      string
	gates     map[string]bool
	config    string
	scenarios []scenario
}

var profiles = []profile{
	{
		name: "classical ordering",
		// Granular QuotaReserved reasons show which branch of the loop a head took.
		gates: map[string]bool{"UnadmittedWorkloadsObservability": true},
		scenarios: []scenario{
			{name: "within-cq", run: preemptionWithinClusterQueue},
			{name: "reclaim", run: reclaimWithinCohort},
			{name: "borrowing", run: borrowingWithLimit},
			{name: "partial", run: partialAdmission},
			{name: "strict-fifo", run: queueingStrategy(kueue.StrictFIFO)},
			{name: "best-effort", run: queueingStrategy(kueue.BestEffortFIFO)},
			{name: "cross-cq-order", run: orderAcrossClusterQueues(false)},
			{name: "admission-checks", run: admissionChecks},
		},
	},
	{
		name:   "fair sharing",
		gates:  map[string]bool{"UnadmittedWorkloadsObservability": true},
		config: "fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n",
		scenarios: []scenario{
			{name: "fs-preemption", run: fairSharingPreemption},
			{name: "fs-order", run: orderAcrossClusterQueues(true)},
		},
	},
	{
		name:  "waitForPodsReady",
		gates: map[string]bool{"UnadmittedWorkloadsObservability": false},
		config: `waitForPodsReady:
  timeout: 3s
  blockAdmission: true
  requeuingStrategy:
    timestamp: Eviction
    backoffLimitCount: 1
    backoffBaseSeconds: 1
    backoffMaxSeconds: 2
`,
		scenarios: []scenario{
			{name: "podsready", run: podsReadyRequeue},
		},
	},
	{
		// Beta in Kueue v0.19.2 and on by default; named so that the profile says what it covers.
		name: "default-on beta gates",
		gates: map[string]bool{
			"UnadmittedWorkloadsObservability": true,
			"TopologyAwareScheduling":          true,
			"AdmissionFairSharing":             true,
			"ElasticJobsViaWorkloadSlices":     true,
		},
		// A long half-life keeps the LocalQueues' usage in the order the scenarios give it.
		// The weight only scales usage, the same for every LocalQueue.
		config: `admissionFairSharing:
  usageHalfLifeTime: 30s
  usageSamplingInterval: 1s
  resourceWeights:
    cpu: 2
`,
		scenarios: []scenario{
			{name: "tas", run: topologyAwareScheduling},
			{name: "afs-order", run: admissionFairSharingOrder},
			{name: "afs-preempt", run: admissionFairSharingPreemption},
			{name: "elastic", run: elasticScaleUp},
		},
	},
	{
		// A head that fits no flavor and may not preempt: parked, or tried every cycle
		// (issue 29). The attempts are counted by namespace, so each scenario has its own.
		name:      "unfit heads",
		gates:     map[string]bool{"UnadmittedWorkloadsObservability": true, "TopologyAwareScheduling": true},
		scenarios: unfitHeadScenarios,
	},
}

var _ = ginkgo.Describe("Scheduler parity with upstream", func() {
	for _, p := range profiles {
		ginkgo.Describe(p.name, ginkgo.Ordered, func() {
			// outcomes[kind][scenario] is what each scenario recorded.
			outcomes := map[string]map[string]scenarioResult{}
			for _, k := range kinds {
				ginkgo.Context(k.name, ginkgo.Ordered, func() {
					var env *util.Env
					ginkgo.BeforeAll(func() {
						env = startEnv(k, p.gates, p.config)
						outcomes[k.name] = map[string]scenarioResult{}
					})
					ginkgo.AfterAll(func() {
						if env != nil {
							gomega.Expect(env.Stop()).To(gomega.Succeed())
						}
					})
					for _, s := range p.scenarios {
						ginkgo.It(s.name, func() {
							r := newRun(env, s.name)
							s.run(r)
							r.finish()
							outcomes[k.name][s.name] = r.result
						})
					}
				})
			}
			ginkgo.It("reached the same outcomes with every scheduler", func() {
				ref := outcomes[kinds[0].name]
				for _, k := range kinds[1:] {
					for _, s := range p.scenarios {
						gomega.Expect(ref[s.name].States).NotTo(gomega.BeEmpty(), "scenario %s recorded nothing", s.name)
						if diff := cmp.Diff(ref[s.name], outcomes[k.name][s.name]); diff != "" {
							ginkgo.Fail("scenario " + s.name + ": " + kinds[0].name + " (-) and " + k.name + " (+) differ:\n" + diff)
						}
					}
				}
			})
		})
	}
})

// A higher-priority Job takes the quota of a lower-priority one in the same ClusterQueue.
func preemptionWithinClusterQueue(r *run) {
	r.clusterQueue("within-cq", "4", preemption(kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyNever))
	r.job("low", "within-cq", "3", priority("p100"))
	r.expect("low alone", map[string]want{"low": admitted})

	r.job("equal", "within-cq", "3", priority("p100"))
	r.expect("same priority waits", map[string]want{
		"low":   admitted,
		"equal": pending.withReason(kueue.WorkloadQuotaReservedReasonWaitingForQuota),
	})

	r.job("high", "within-cq", "3", priority("p1000"))
	r.expect("high preempts low", map[string]want{
		"high":  admitted,
		"low":   pending.preemptedBy(kueue.InClusterQueueReason),
		"equal": pending,
	})
}

// A ClusterQueue gets back the nominal quota another one borrowed.
func reclaimWithinCohort(r *run) {
	r.clusterQueue("reclaim-lender", "4", inCohort("reclaim"), preemption(kueue.PreemptionPolicyNever, kueue.PreemptionPolicyAny))
	r.clusterQueue("reclaim-borrower", "0", inCohort("reclaim"))
	r.job("borrower", "reclaim-borrower", "4", priority("p1000"))
	r.expect("borrowing", map[string]want{"borrower": admitted})

	r.job("owner", "reclaim-lender", "3", priority("p100"))
	r.expect("reclaimed", map[string]want{
		"owner":    admitted,
		"borrower": pending.preemptedBy(kueue.InCohortReclamationReason),
	})
}

// Borrowing up to the borrowing limit, and no further; no preemption anywhere.
func borrowingWithLimit(r *run) {
	r.clusterQueue("borrowing-a", "2", inCohort("borrowing"), borrowingLimit("1"))
	r.clusterQueue("borrowing-b", "2", inCohort("borrowing"))
	r.job("a1", "borrowing-a", "2")
	r.job("a2", "borrowing-a", "1")
	r.expect("a borrows", map[string]want{"a1": admitted, "a2": admitted})

	r.job("a3", "borrowing-a", "1")
	r.job("b1", "borrowing-b", "1")
	r.job("b2", "borrowing-b", "1")
	r.expect("limits hold", map[string]want{"a1": admitted, "a2": admitted, "b1": admitted, "a3": pending, "b2": pending})
}

// A Job that allows fewer pods is admitted with as many as fit.
func partialAdmission(r *run) {
	r.clusterQueue("partial", "3")
	r.job("wide", "partial", "1", pods(5, 2))
	r.expect("reduced", map[string]want{"wide": admitted.withCounts(3)})

	r.job("too-wide", "partial", "1", pods(4, 3))
	r.expect("no room for the minimum", map[string]want{"wide": admitted, "too-wide": pending})
}

// With StrictFIFO a head that does not fit blocks smaller Jobs behind it; with
// BestEffortFIFO they go ahead.
func queueingStrategy(strategy kueue.QueueingStrategy) func(r *run) {
	return func(r *run) {
		name := "fifo-" + map[kueue.QueueingStrategy]string{kueue.StrictFIFO: "strict", kueue.BestEffortFIFO: "best-effort"}[strategy]
		var opts []cqOption
		if strategy == kueue.StrictFIFO {
			opts = append(opts, strictFIFO)
		}
		r.clusterQueue(name, "4", opts...)
		r.job("first", name, "3", priority("p100"))
		r.expect("first", map[string]want{"first": admitted})

		r.job("big", name, "2", priority("p1000"))
		r.expect("big waits", map[string]want{"first": admitted, "big": pending})
		r.job("small", name, "1", priority("p100"))
		if strategy == kueue.StrictFIFO {
			r.holds(2*time.Second, map[string]want{"small": pending})
			r.expect("small blocked", map[string]want{"first": admitted, "big": pending, "small": pending})
		} else {
			r.expect("small goes ahead", map[string]want{"first": admitted, "big": pending, "small": admitted})
		}

		r.deleteJob("first")
		r.expect("after first", map[string]want{"big": admitted, "small": admitted})
	}
}

// Two heads from different ClusterQueues of a cohort compete in one cycle for room for
// one. Classical ordering lets the higher priority win; fair sharing lets the ClusterQueue
// that would borrow less win.
func orderAcrossClusterQueues(fair bool) func(r *run) {
	return func(r *run) {
		r.clusterQueue("order-a", "1", inCohort("order"))
		r.clusterQueue("order-b", "1", inCohort("order"))
		r.clusterQueue("order-c", "3", inCohort("order"))
		r.job("c1", "order-c", "1")
		r.job("c2", "order-c", "1")
		r.job("a1", "order-a", "1")
		r.job("a2", "order-a", "1")
		r.job("b1", "order-b", "1")
		r.expect("cohort full", map[string]want{"c1": admitted, "c2": admitted, "a1": admitted, "a2": admitted, "b1": admitted})

		r.job("a3", "order-a", "1", priority("p1000"))
		r.job("b2", "order-b", "1", priority("p100"))
		r.expect("both wait", map[string]want{"a3": pending, "b2": pending})

		// Freeing room requeues both heads together.
		r.deleteJob("c2")
		winner, loser := "a3", "b2"
		if fair {
			winner, loser = "b2", "a3"
		}
		r.expect("one admitted", map[string]want{winner: admitted, loser: pending.withRacyMessage()})
	}
}

// Under fair sharing, a ClusterQueue below its share preempts the lowest-priority Jobs of
// one that borrows.
func fairSharingPreemption(r *run) {
	policy := preemption(kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyAny)
	r.clusterQueue("fs-a", "2", inCohort("fs"), policy)
	r.clusterQueue("fs-b", "2", inCohort("fs"), policy)
	for i, p := range []string{"p400", "p300", "p200", "p100"} {
		r.job(fmt.Sprintf("a%d", i+1), "fs-a", "1", priority(p))
	}
	r.expect("a uses the cohort", map[string]want{"a1": admitted, "a2": admitted, "a3": admitted, "a4": admitted})

	r.job("b1", "fs-b", "1", priority("p100"))
	r.job("b2", "fs-b", "1", priority("p100"))
	r.expect("b takes its share back", map[string]want{
		"a1": admitted, "a2": admitted, "b1": admitted, "b2": admitted,
		// b is below its nominal quota, so upstream reports reclamation.
		"a3": pending.preemptedBy(kueue.InCohortReclamationReason),
		"a4": pending.preemptedBy(kueue.InCohortReclamationReason),
	})
}

// With blockAdmission, a Job waits while an admitted one is not ready; Jobs whose pods
// never get ready are evicted on timeout, requeued with backoff and finally deactivated.
func podsReadyRequeue(r *run) {
	r.clusterQueue("podsready", "4")
	r.job("j1", "podsready", "2")
	r.expect("j1 admitted", map[string]want{"j1": admitted})
	r.job("j2", "podsready", "1")
	r.see("j2 blocked", map[string]want{
		"j1": admitted,
		"j2": pending.withMessage("waiting for all admitted workloads to be in PodsReady condition"),
	})
	deactivated := want{admitted: ptr.To(false), active: ptr.To(false)}
	r.expect("both deactivated", map[string]want{"j1": deactivated, "j2": deactivated})
}
