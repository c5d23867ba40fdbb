package reliability_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// The load test (long form only): 10,000 one-CPU Workloads over 100 ClusterQueues of 10 CPUs in
// a two-level cohort tree, with time-based preemption and both min-runtime protections on.
const (
	loadWorkloads = 10000
	loadCohorts   = 10
	loadQueues    = 100
	loadQueueCPU  = 10
	// loadMemoryBound is the chart's default memory limit for the manager.
	loadMemoryBound = 1 << 30
)

var _ = ginkgo.Describe("Load: 10,000 workloads over 100 ClusterQueues in a cohort tree", ginkgo.Ordered, func() {
	ctx := context.Background()

	ginkgo.It("loses nothing, keeps admitting, and stays within the chart's memory limit", func() {
		if !long {
			ginkgo.Skip("long form only (RELIABILITY_LONG=1, make test-reliability)")
		}
		k := startCluster()
		metricsAddr, err := controlplane.FreeLoopbackAddress()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		m := k.startManagerWith("load", nil, metricsAddr)
		m.waitReady()
		c := k.client
		createBaseObjects(ctx, c)
		ns := "load"
		createNamespace(ctx, c, ns)

		ginkgo.By("creating the cohort tree and the ClusterQueues")
		cohort := func(name, parent string, preemption map[string]any) {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"preemption": preemption}}}
			u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("Cohort"))
			u.SetName(name)
			if parent != "" {
				gomega.Expect(unstructured.SetNestedField(u.Object, parent, "spec", "parentName")).To(gomega.Succeed())
			}
			gomega.Expect(c.Create(ctx, u)).To(gomega.Succeed())
		}
		cohort("load", "", map[string]any{"reclaimMinRuntime": "6s"})
		for i := range loadCohorts {
			cohort(fmt.Sprintf("load-%d", i), "load", map[string]any{"preemptMinRuntime": "5s"})
		}
		for i := range loadQueues {
			gomega.Expect(util.CreateClusterQueue(ctx, c, ns, fmt.Sprintf("cq-%02d", i), strconv.Itoa(loadQueueCPU), fmt.Sprintf("load-%d", i%loadCohorts), map[string]any{
				"withinClusterQueue":       "LowerOrNewerEqualPriority",
				"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "1m"},
				"reclaimWithinCohort":      "Any",
			})).To(gomega.Succeed())
		}

		ginkgo.By(fmt.Sprintf("creating %d Workloads from 8 clients", loadWorkloads))
		began := time.Now()
		var next atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= loadWorkloads {
						return
					}
					if err := c.Create(ctx, loadWorkload(ns, i)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
		}
		created := time.Since(began)

		capacity := loadQueues * loadQueueCPU
		ginkgo.By(fmt.Sprintf("waiting until the %d CPUs are all reserved", capacity))
		gomega.Eventually(func(g gomega.Gomega) { g.Expect(loadCount(g, ctx, c, ns).reserved).To(gomega.Equal(capacity)) }, 10*time.Minute, time.Second).Should(gomega.Succeed())
		filled := time.Since(began)

		ginkgo.By("finishing half of them and waiting until the freed quota is reserved again")
		finished := finishSome(ctx, c, ns, capacity/2)
		gomega.Eventually(func(g gomega.Gomega) {
			st := loadCount(g, ctx, c, ns)
			g.Expect(st.finished).To(gomega.Equal(finished))
			g.Expect(st.reserved).To(gomega.Equal(capacity))
		}, 5*time.Minute, time.Second).Should(gomega.Succeed())
		refilled := time.Since(began)

		ginkgo.By("checking that nothing was lost and that every ClusterQueue counts what it holds")
		st := loadCount(gomega.Default, ctx, c, ns)
		gomega.Expect(st.total).To(gomega.Equal(loadWorkloads))
		gomega.Expect(st.reserved + st.finished + st.pending).To(gomega.Equal(loadWorkloads))
		gomega.Eventually(func(g gomega.Gomega) {
			var cqs kueue.ClusterQueueList
			g.Expect(c.List(ctx, &cqs)).To(gomega.Succeed())
			reserving := int32(0)
			for _, cq := range cqs.Items {
				reserving += cq.Status.ReservingWorkloads
			}
			g.Expect(int(reserving)).To(gomega.Equal(capacity), "the ClusterQueues' statuses count the workloads holding quota")
		}, timeout, interval).Should(gomega.Succeed())

		rss := peakRSS(m)
		stats := scrape(metricsAddr, "go_memstats_alloc_bytes_total", "go_memstats_mallocs_total", "go_memstats_heap_inuse_bytes", "process_cpu_seconds_total")
		report("load: %d Workloads created in %s; %d CPUs reserved after %s; %d finished and their quota reserved again after %s",
			loadWorkloads, created.Round(time.Second), capacity, filled.Round(time.Second), finished, refilled.Round(time.Second))
		report("load: manager peak RSS %d MiB (bound %d MiB), %.1f GiB allocated in %.0f M allocations, heap in use %d MiB, %.0f s of CPU",
			rss>>20, loadMemoryBound>>20, stats["go_memstats_alloc_bytes_total"]/(1<<30), stats["go_memstats_mallocs_total"]/1e6,
			int64(stats["go_memstats_heap_inuse_bytes"])>>20, stats["process_cpu_seconds_total"])
		report("load: at the end %d reserved, %d finished, %d pending (%d with a QuotaReserved condition)", st.reserved, st.finished, st.pending, st.explained)
		gomega.Expect(rss).To(gomega.BeNumerically("<", loadMemoryBound), "the manager's peak RSS stays under the chart's memory limit")
		ginkgo.By("checking that no manager logged a token, password or key")
		k.expectNoSecrets([]*managerProcess{m})
	})
})

// loadWorkload is a one-pod, one-CPU Workload of LocalQueue cq-(i mod 100).
func loadWorkload(ns string, i int) *kueue.Workload {
	return &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("wl-%05d", i)},
		Spec: kueue.WorkloadSpec{
			QueueName: kueue.LocalQueueName(fmt.Sprintf("cq-%02d", i%loadQueues)),
			PodSets: []kueue.PodSet{{
				Name:  kueue.DefaultPodSetName,
				Count: 1,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "main", Image: "busybox",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
					}},
				}},
			}},
		},
	}
}

type loadState struct {
	total, reserved, finished, pending, explained int
}

func loadCount(g gomega.Gomega, ctx context.Context, c client.Client, ns string) loadState {
	var wls kueue.WorkloadList
	g.Expect(c.List(ctx, &wls, client.InNamespace(ns))).To(gomega.Succeed())
	var st loadState
	st.total = len(wls.Items)
	for i := range wls.Items {
		conds := wls.Items[i].Status.Conditions
		switch {
		case apimeta.IsStatusConditionTrue(conds, kueue.WorkloadFinished):
			st.finished++
		case apimeta.IsStatusConditionTrue(conds, kueue.WorkloadQuotaReserved):
			st.reserved++
		default:
			st.pending++
			if apimeta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved) != nil {
				st.explained++
			}
		}
	}
	return st
}

// finishSome marks n Workloads holding quota as finished, as a job integration would; it returns
// how many it finished.
func finishSome(ctx context.Context, c client.Client, ns string, n int) int {
	ginkgo.GinkgoHelper()
	var wls kueue.WorkloadList
	gomega.Expect(c.List(ctx, &wls, client.InNamespace(ns))).To(gomega.Succeed())
	done := 0
	for i := range wls.Items {
		wl := &wls.Items[i]
		if done == n || !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
			continue
		}
		gomega.Eventually(func() error {
			var latest kueue.Workload
			if err := c.Get(ctx, client.ObjectKeyFromObject(wl), &latest); err != nil {
				return err
			}
			apimeta.SetStatusCondition(&latest.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "finished by the load test"})
			return c.Status().Update(ctx, &latest)
		}, timeout, interval).Should(gomega.Succeed())
		done++
	}
	return done
}

// peakRSS is the process's peak resident set size, in bytes (VmHWM).
func peakRSS(p *managerProcess) int64 {
	ginkgo.GinkgoHelper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			return kb << 10
		}
	}
	ginkgo.Fail("no VmHWM in /proc status")
	return 0
}

// scrape reads the named unlabelled metrics from the manager's /metrics.
func scrape(addr string, names ...string) map[string]float64 {
	ginkgo.GinkgoHelper()
	resp, err := http.Get("http://" + addr + "/metrics")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	defer resp.Body.Close()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && want[name] {
			v, err := strconv.ParseFloat(value, 64)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			out[name] = v
		}
	}
	gomega.Expect(out).To(gomega.HaveLen(len(names)), "metrics %v on /metrics", names)
	return out
}
