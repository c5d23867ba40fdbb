package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
)

// The soak (make soak; skipped unless SOAK_DURATION is set): for hours on the local cluster with
// Pods, Jobs arrive at a steady rate into three ClusterQueues (one taking turns, one protecting
// its workloads with a min-runtime and notices, one of Jobs declaring an expected runtime), under
// a preemption budget, and the manager is killed every SOAK_KILL_EVERY (default 10m). Every 10 s
// it checks what a user would: no ClusterQueue holds more than its quota, no protected workload
// is preempted inside its min-runtime, no turn lasts much longer than its window while another
// Job waits; every minute it samples the manager's resident memory and goroutines; at the end,
// every Job has exactly one Workload and the memory and goroutines have not grown since warm-up.
var _ = ginkgo.Describe("soak", ginkgo.Label("soak"), func() {
	ginkgo.It("runs for SOAK_DURATION with the manager killed every SOAK_KILL_EVERY, every invariant holding", func() {
		total, err := time.ParseDuration(os.Getenv("SOAK_DURATION"))
		if err != nil || total <= 0 {
			ginkgo.Skip("SOAK_DURATION not set (make soak)")
		}
		// Ginkgo ends a suite after its own timeout (one hour unless -ginkgo.timeout says more),
		// whatever go test's -timeout: a two-hour soak cut off at an hour reports nothing.
		if suite, _ := ginkgo.GinkgoConfiguration(); suite.Timeout < total+15*time.Minute {
			ginkgo.Fail(fmt.Sprintf("-ginkgo.timeout %s is shorter than SOAK_DURATION %s and 15 minutes of set-up and checks: the suite would end the soak early", suite.Timeout, total))
		}
		killEvery := 10 * time.Minute
		if d, err := time.ParseDuration(os.Getenv("SOAK_KILL_EVERY")); err == nil && d > 0 {
			killEvery = d
		}
		seed := time.Now().UnixNano() % 1_000_000
		if s, err := strconv.ParseInt(os.Getenv("SOAK_SEED"), 10, 64); err == nil {
			seed = s
		}
		rng := rand.New(rand.NewSource(seed))
		ginkgo.GinkgoWriter.Printf("soak: %s, a kill every %s, seed %d (SOAK_SEED)\n", total, killEvery, seed)
		ctx := context.Background()

		const window, minRuntime = time.Minute, 2 * time.Minute
		var err2 error
		metricsAddress, err2 = controlplane.FreeLoopbackAddress()
		gomega.Expect(err2).NotTo(gomega.HaveOccurred())
		managerGates = map[string]bool{"PreemptionBudget": true}
		config := defaultManagerExtra + "timeshare:\n  preemptionBudget: {maxPreemptions: 20, period: 10m, burst: 20}\n"
		reconfigureManager(config)
		ginkgo.DeferCleanup(func() {
			metricsAddress, managerGates = "0", nil
			reconfigureManager(defaultManagerExtra)
		})
		priorityClass(ctx, "soak-low", 100, nil)
		priorityClass(ctx, "soak-high", 1000, nil)
		ns := newNamespace(ctx, "soak")
		queues := map[string]map[string]any{
			"soak-turns": {"withinClusterQueue": "LowerOrNewerEqualPriority", "withinClusterQueueConfig": map[string]any{"minAdmitDuration": window.String()}},
			"soak-protected": {"withinClusterQueue": "LowerPriority", "preemptMinRuntime": minRuntime.String(),
				"noticePeriod": "20s", "noticeOnPriorityPreemption": true},
			"soak-expected": {"withinClusterQueue": "LowerPriority"},
		}
		for name, p := range queues {
			clusterQueue(ctx, ns, name, "4", p)
		}

		var jobs []*batchv1.Job
		var problems []string
		fail := func(format string, args ...any) {
			if len(problems) < 20 {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		}
		// Each queue keeps at most maxBacklog unfinished Jobs, an arrival into a full one waits
		// for the next: its turns and expected runtimes restart Jobs of 2 to 10 minutes, so the
		// queues finish fewer Jobs than a Job every 20 s brings, and an unbounded backlog would make
		// each restarted manager cache more, whatever its own memory does.
		const maxBacklog = 8
		skipped := 0
		unfinished := func(queue string) int {
			var list batchv1.JobList
			if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{constants.QueueLabel: queue}); err != nil {
				return 0
			}
			n := 0
			for _, j := range list.Items {
				if j.Status.CompletionTime == nil && j.Status.Failed == 0 {
					n++
				}
			}
			return n
		}
		arrive := func(i int) {
			queue := []string{"soak-turns", "soak-protected", "soak-expected"}[i%3]
			if unfinished(queue) >= maxBacklog {
				skipped++
				return
			}
			// One size in the queue that takes turns: any waiting Job fits in any expired holder's place.
			cpu := "2"
			if queue != "soak-turns" {
				cpu = fmt.Sprint(1 + rng.Intn(4))
			}
			spec := jobSpec{name: fmt.Sprintf("j%04d", i), queue: queue, cpu: cpu, grace: 5,
				runtime: fmt.Sprintf("%ds", 120+rng.Intn(480)), priorityClass: "soak-low"}
			switch {
			case queue == "soak-protected" && rng.Intn(4) == 0:
				spec.priorityClass = "soak-high"
			case queue == "soak-expected":
				spec.annotations = map[string]string{"kueue-timeshare.io/expected-runtime": "2m", "kueue-timeshare.io/requeue-delay": "30s"}
			}
			j := newJob(ns, spec)
			// As on a busy cluster, finished Jobs go (and their Workloads and Pods with them), so
			// that the objects the manager caches stay about as many and its memory can level off.
			j.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
			if err := k8s.Create(ctx, j); err != nil {
				fail("creating %s: %v", j.Name, err)
				return
			}
			jobs = append(jobs, j)
		}

		// holds remembers, per workload seen holding quota, when that hold began (first seen) and
		// when it was admitted.
		type hold struct {
			since, admitted time.Time
		}
		holds := map[string]*hold{}
		// ended counts the holds seen ending, by eviction reason ("finished" when not evicted).
		ended := map[string]int{}
		check := func(now time.Time) {
			var list kueue.WorkloadList
			if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return
			}
			used := map[string]int64{}
			waiting := map[string]bool{}
			for i := range list.Items {
				wl := &list.Items[i]
				cq := string(wl.Spec.QueueName)
				if holding(wl) {
					for _, ps := range wl.Spec.PodSets {
						used[cq] += ps.Template.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() * int64(ps.Count)
					}
				} else if apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished) == nil {
					waiting[cq] = true
				}
			}
			for cq, m := range used {
				if m > 4000 {
					fail("%s: %dm CPU held, quota 4 at %s", cq, m, now.Format(time.TimeOnly))
				}
			}
			for i := range list.Items {
				wl := &list.Items[i]
				cq := string(wl.Spec.QueueName)
				h := holds[wl.Name]
				if holding(wl) {
					if h == nil {
						h = &hold{since: now}
						holds[wl.Name] = h
					}
					if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
						h.admitted = c.LastTransitionTime.Time
					}
				}
				if h == nil {
					continue
				}
				// A turn ends at its window; the handover takes the victim's grace period, the
				// hold's margin and a sampling period at most.
				if cq == "soak-turns" && holding(wl) && waiting[cq] && !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) {
					if held := now.Sub(h.since); held > window+time.Minute {
						fail("%s held soak-turns for %s while another Job waited", wl.Name, held.Round(time.Second))
						h.since = now
					}
				}
				if p := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); cq == "soak-protected" && p != nil &&
					p.Status == metav1.ConditionTrue && p.Reason == kueue.InClusterQueueReason && !h.admitted.IsZero() && p.LastTransitionTime.After(h.admitted) {
					if ran := p.LastTransitionTime.Sub(h.admitted); ran < minRuntime-time.Second {
						fail("%s preempted %s after its admission, inside its min-runtime %s", wl.Name, ran, minRuntime)
					}
				}
				if !holding(wl) {
					reason := "finished"
					if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
						reason = c.Reason
						if p := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); p != nil && p.Status == metav1.ConditionTrue {
							reason = p.Reason
						}
					}
					ended[reason]++
					delete(holds, wl.Name)
				}
			}
		}
		var samples []soakSample
		start := time.Now()
		kills, arrivals := 0, 0
		nextKill, nextSample, nextArrival := start.Add(killEvery), start, start
		var downtime []time.Duration
		for now := time.Now(); now.Sub(start) < total; now = time.Now() {
			if !now.Before(nextArrival) {
				arrive(arrivals)
				arrivals++
				nextArrival = now.Add(20 * time.Second)
			}
			if !now.Before(nextKill) {
				mgr.kill()
				t := time.Now()
				mgr = startManager(readyzURL)
				downtime = append(downtime, time.Since(t))
				kills++
				nextKill = time.Now().Add(killEvery)
			}
			if !now.Before(nextSample) {
				if rss, gr, ok := managerSample(); ok {
					samples = append(samples, soakSample{life: kills, rss: rss, goroutines: gr})
					// As it goes, so that a run cut short still says how the manager grew.
					ginkgo.GinkgoWriter.Printf("soak: %s, %d kills: RSS %.0f MB, %.0f goroutines\n", now.Sub(start).Round(time.Minute), kills, rss/1e6, gr)
				}
				nextSample = now.Add(time.Minute)
			}
			check(now)
			time.Sleep(10 * time.Second)
		}

		ginkgo.By("checking that every Job left has exactly one Workload, and every Workload its Job")
		var list kueue.WorkloadList
		gomega.Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(gomega.Succeed())
		var left batchv1.JobList
		gomega.Expect(k8s.List(ctx, &left, client.InNamespace(ns))).To(gomega.Succeed())
		owners := map[string]int{}
		for _, wl := range list.Items {
			for _, o := range wl.OwnerReferences {
				owners[o.Name]++
			}
		}
		exists := map[string]bool{}
		for _, j := range left.Items {
			exists[j.Name] = true
			// A Job the TTL controller is deleting may have lost its Workload already.
			if n := owners[j.Name]; n != 1 && j.DeletionTimestamp == nil {
				fail("Job %s has %d Workloads", j.Name, n)
			}
		}
		for name, n := range owners {
			if !exists[name] && n > 0 {
				fail("%d Workloads outlive their Job %s", n, name)
			}
		}
		report := fmt.Sprintf("soak %s, seed %d: %d Jobs (%d left, %d arrivals skipped into a full queue), %d kills (back to ready: max %s), %d samples",
			total, seed, len(jobs), len(left.Items), skipped, kills, maxOf(downtime).Round(100*time.Millisecond), len(samples))
		// Each kill starts a new process, whose memory climbs as its caches fill: compare like
		// with like, the peak of the first whole life after warm-up (between the first and the
		// second kill) with the peak of the last whole one.
		warm, last := lifePeak(samples, 1), lifePeak(samples, kills-1)
		report += fmt.Sprintf("; holds ended: %v", ended)
		report += fmt.Sprintf("; manager RSS peak %.0f MB in the life after the first kill, %.0f MB in the last whole life; goroutines %.0f, then %.0f",
			warm.rss/1e6, last.rss/1e6, warm.goroutines, last.goroutines)
		ginkgo.AddReportEntry("soak", report)
		ginkgo.GinkgoWriter.Println(report)
		gomega.Expect(problems).To(gomega.BeEmpty())
		if kills < 3 {
			// No two whole lives after the first kill to compare.
			ginkgo.GinkgoWriter.Println("soak: too short to compare the manager's memory across its lives (fewer than 3 kills)")
			return
		}
		gomega.Expect(last.goroutines).To(gomega.BeNumerically("<=", warm.goroutines*1.5+50), "goroutines grew")
		gomega.Expect(last.rss).To(gomega.BeNumerically("<=", warm.rss*1.5), "resident memory grew")
	})
})

// managerSample reads the manager's resident memory and goroutines from its /metrics.
func managerSample() (rss, goroutines float64, ok bool) {
	resp, err := http.Get("http://" + metricsAddress + "/metrics")
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, found := strings.Cut(sc.Text(), " ")
		if !found {
			continue
		}
		switch name {
		case "process_resident_memory_bytes":
			rss, _ = strconv.ParseFloat(value, 64)
		case "go_goroutines":
			goroutines, _ = strconv.ParseFloat(value, 64)
		}
	}
	return rss, goroutines, rss > 0 && goroutines > 0
}

// soakSample is the manager's memory and goroutines in one minute of the soak, in the process
// started after life kills.
type soakSample struct {
	life            int
	rss, goroutines float64
}

// lifePeak is the sample of the highest memory among those of life, with its goroutines; the
// zero sample when there are none.
func lifePeak(samples []soakSample, life int) soakSample {
	var peak soakSample
	for _, s := range samples {
		if s.life == life && s.rss > peak.rss {
			peak = s
		}
	}
	return peak
}

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
