package reliability_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// killPoint is when a kill happens: at a random moment, or right after the watch sees a quota
// reservation or a preemption written (the manager then has the rest of that admission or
// preemption in flight: unsuspending the Job, admitting the preemptor, counting usage).
type killPoint string

const (
	killRandom     killPoint = "random moment"
	killAdmission  killPoint = "just after a quota reservation"
	killPreemption killPoint = "just after a preemption"
)

var _ = ginkgo.Describe("Manager killed with SIGKILL and restarted under a stream of workloads", ginkgo.Ordered, func() {
	ctx := context.Background()
	var (
		k     *cluster
		h     *history
		procs []*managerProcess
	)

	ginkgo.BeforeAll(func() {
		k = startCluster()
		h = watchHistory(k.cp.Config)
	})

	ginkgo.It("loses no workload, double-counts no quota, breaks no protection and keeps every window's start", func() {
		rng := rand.New(rand.NewPCG(seed, 1))
		jobs, kills := 40, 4
		if long {
			// Enough Jobs that admissions and preemptions go on through the hundred kills.
			jobs, kills = 600, 100
		}
		m, started := k.startReady("restart-0", nil)
		procs = append(procs, started...)
		createBaseObjects(ctx, k.client)
		ns := "restarts"
		pol, queues := allPolicies(ctx, k.client, ns)
		dumpOnFailure(k.client, ns)
		s := startStream(k.client, ns, drawJobs(rng, jobs, queues))

		points := []killPoint{killAdmission, killPreemption, killRandom}
		var downtime time.Duration
		spanned, byPoint := 0, map[killPoint]int{}
		for i := range kills {
			point := points[i%len(points)]
			switch point {
			case killAdmission:
				// Right after one of the next few reservations is written.
				for range 1 + rng.IntN(3) {
					select {
					case <-h.next(eventAdmission):
					case <-time.After(15 * time.Second):
						point = killRandom
					}
				}
			case killPreemption:
				select {
				case <-h.next(eventPreemption):
				case <-time.After(15 * time.Second):
					point = killRandom
				}
			default:
				// An outage at a moment nothing in particular announces.
				<-time.After(time.Duration(500+rng.IntN(3500)) * time.Millisecond)
			}
			m.kill()
			byPoint[point]++
			held := h.reservedNow()
			ginkgo.By(fmt.Sprintf("kill %d/%d %s: SIGKILL with %d workloads holding quota", i+1, kills, point, len(held)))
			down := time.Duration(rng.IntN(1500)) * time.Millisecond
			<-time.After(down)
			m, started = k.startReady(fmt.Sprintf("restart-%d", i+1), nil)
			procs = append(procs, started...)
			downtime += time.Since(started[0].startedAt) + down
			spanned += h.lastedPast(held, time.Now())
		}
		ginkgo.By("waiting for the stream to be submitted")
		gomega.Eventually(s.done, 3*timeout).Should(gomega.BeClosed())
		s.stop()

		ginkgo.By("checking that everything settles: admitted, finished or pending with a reason; usage = sum of requests <= quota")
		st := expectSettled(ctx, k.client, ns, queues)

		ginkgo.By("checking the history: no preemption inside a protection or window, no window moved, nothing half written, no double eviction")
		logged := preemptionsLogged(procs)
		gomega.Expect(h.violations(pol, logged)).To(gomega.BeEmpty())
		gomega.Expect(spanned).To(gomega.BeNumerically(">", 0), "some workloads held their quota across a restart")

		report("restarts: %d Jobs, %d kills (%s), %d Job creations refused while down, %s downtime in total (restart to ready included)",
			jobs, kills, formatPoints(byPoint), s.refused.Load(), downtime.Round(100*time.Millisecond))
		report("restarts: %s; %d evictions logged by the managers; %d reservations lasted across a restart with their start unchanged", h.summary(), total(logged), spanned)
		report("restarts: settled with %d finished, %d admitted, %d pending (%d of them parked untried, equivalent to one that says why)", st.finished, st.admitted, st.pending, st.parked)

		ginkgo.By("checking that no manager logged a token, password or key")
		k.expectNoSecrets(procs)

		ginkgo.By("draining: every Job runs and finishes")
		drain(ctx, k.client, ns)
	})
})

func formatPoints(by map[killPoint]int) string {
	var parts []string
	for _, p := range []killPoint{killAdmission, killPreemption, killRandom} {
		if by[p] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", by[p], p))
		}
	}
	return strings.Join(parts, ", ")
}
