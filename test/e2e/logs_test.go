package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
)

// What a turn logs at error level, next to what Kueue's own admission loop logs when it preempts
// the same kind of Job (one Pod, 10 s grace) on the same cluster (the manager in upstream mode:
// Kueue's scheduler and controllers, none of ours deciding). Kueue's job reconciler logs some
// errors while a suspended Job's Pods terminate; a turn must add none.
var _ = ginkgo.Describe("error-level logs of a turn", ginkgo.Ordered, func() {
	var upstreamBin string
	ginkgo.BeforeAll(func() {
		ginkgo.By("building the manager in upstream mode")
		upstreamBin = filepath.Join(logDir, "upstreammode")
		build := exec.Command("go", "build", "-o", upstreamBin, "./test/e2e/upstreammode")
		build.Dir = root
		out, err := build.CombinedOutput()
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "go build ./test/e2e/upstreammode: %s", out)
		priorityClass(context.Background(), "e2e-logs-low", 100, nil)
		priorityClass(context.Background(), "e2e-logs-high", 1000, nil)
	})

	ginkgo.It("are only those Kueue's own scheduler logs for a preemption, or retried write conflicts", func() {
		ctx := context.Background()
		ns := newNamespace(ctx, "logs")
		clusterQueue(ctx, ns, "logs-upstream", "4", map[string]any{"withinClusterQueue": "LowerPriority"})
		clusterQueue(ctx, ns, "logs-turns", "4", map[string]any{
			"withinClusterQueue":       "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "1m"},
		})

		ginkgo.By("restarting the manager in upstream mode, and letting Kueue preempt a lower-priority Job")
		mgr.stop()
		upstream := startProcess([]string{upstreamBin, "--config=" + cfgPath, "--kubeconfig=" + mgrKubeconfig, "--zap-log-level=2"},
			"upstream-mode.log", readyzURL)
		low := newJob(ns, jobSpec{name: "low", queue: "logs-upstream", cpu: "4", grace: 10, priorityClass: "e2e-logs-low"})
		high := newJob(ns, jobSpec{name: "high", queue: "logs-upstream", cpu: "4", grace: 10, priorityClass: "e2e-logs-high"})
		submit(ctx, low)
		expectRunning(ctx, low, time.Minute)
		submit(ctx, high)
		handedOver(ctx, low, high)
		upstream.stop()
		theirs := errorClasses(filepath.Join(logDir, "upstream-mode.log"), 0)

		ginkgo.By("restarting our manager, and letting it take one turn between two same-priority Jobs")
		// From readiness on: what a manager logs while its informers start is not a turn's.
		mgr = startManager(readyzURL)
		offset := logSize("manager.log")
		first := newJob(ns, jobSpec{name: "first", queue: "logs-turns", cpu: "4", grace: 10})
		second := newJob(ns, jobSpec{name: "second", queue: "logs-turns", cpu: "4", grace: 10})
		submit(ctx, first)
		expectRunning(ctx, first, time.Minute)
		submit(ctx, second)
		handedOver(ctx, first, second)
		ours := errorClasses(filepath.Join(logDir, "manager.log"), offset)

		ginkgo.AddReportEntry("error-level log lines, Kueue's preemption", describeClasses(theirs))
		ginkgo.AddReportEntry("error-level log lines, our turn", describeClasses(ours))
		for class, n := range ours {
			if _, ok := theirs[class]; ok || retriedConflict.MatchString(class) || startupOrder.MatchString(class) {
				continue
			}
			ginkgo.Fail(fmt.Sprintf("our turn logged %d× an error Kueue's own scheduler does not log for a preemption: %s", n, class))
		}
	})
})

// retriedConflict matches the errors of writes that lost a race and are retried: they depend on
// timing, so one run of Kueue's scheduler may or may not log them.
var retriedConflict = regexp.MustCompile(`the object has been modified|already exists`)

// startupOrder matches Kueue's workload reconciler meeting, in its informer's initial list, a
// Workload admitted to a ClusterQueue that its cache has not been given yet: the two informers
// start in either order after a restart, whichever scheduler runs, and no turn causes it.
var startupOrder = regexp.MustCompile(`^workload-reconciler: Updating workload in cache: cluster queue not found$`)

// handedOver waits until victim's Pods are gone and next's Pods run, then a little longer for
// the reconcilers to settle.
func handedOver(ctx context.Context, victim, next *batchv1.Job) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(jobPods(ctx, victim)).To(gomega.BeEmpty(), "%s's Pods are gone", victim.Name)
		g.Expect(running(jobPods(ctx, next))).To(gomega.Equal(1), "%s's Pod runs", next.Name)
	}, 2*time.Minute, interval).Should(gomega.Succeed())
	time.Sleep(3 * time.Second)
}

func logSize(name string) int64 {
	ginkgo.GinkgoHelper()
	st, err := os.Stat(filepath.Join(logDir, name))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return st.Size()
}

var (
	quoted   = regexp.MustCompile(`\\?"[^"\\]*\\?"`)
	embedded = regexp.MustCompile(`\{.*\}`)
)

// errorClasses counts the JSON log lines at error level in path from offset on, by logger,
// message and error with names and embedded objects left out.
func errorClasses(path string, offset int64) map[string]int {
	ginkgo.GinkgoHelper()
	data, err := os.ReadFile(path)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	out := map[string]int{}
	for _, line := range strings.Split(string(data[offset:]), "\n") {
		var entry struct{ Level, Logger, Msg, Error string }
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &entry) != nil || entry.Level != "error" {
			continue
		}
		e := quoted.ReplaceAllString(embedded.ReplaceAllString(entry.Error, "{…}"), `"…"`)
		out[fmt.Sprintf("%s: %s: %s", entry.Logger, entry.Msg, e)]++
	}
	return out
}

func describeClasses(c map[string]int) string {
	if len(c) == 0 {
		return "none"
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c)) {
		fmt.Fprintf(&b, "\n  %d× %s", c[k], k)
	}
	return b.String()
}
