package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/cmd/kubectl-timeshare/app"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

const unknownDefault = "manager default, not known here (pass --manager-config)"

var _ = ginkgo.Describe("kubectl timeshare queues on a ClusterQueue taking turns", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string
	var jobs []*batchv1.Job

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		ns = namespace(ctx, "turns")
		gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns, "turns", "1", "", map[string]any{
			"withinClusterQueue":       "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "5m"},
		})).To(gomega.Succeed())
		for _, name := range []string{"a", "b", "c"} {
			j := job(ns, "turns", name, "1", "")
			gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
			jobs = append(jobs, j)
		}
	})

	// expected builds the report the plugin must print from the objects in the API.
	expected := func(g gomega.Gomega) app.ClusterQueueReport {
		want := app.ClusterQueueReport{Name: "turns",
			Settings: []app.SettingReport{
				{Name: "minAdmitDuration", Value: "5m0s", Source: "ClusterQueue turns"},
				{Name: "preemptMinRuntime", Source: unknownDefault},
				{Name: "reclaimMinRuntime", Source: unknownDefault},
				{Name: "noticePeriod", Source: unknownDefault},
				{Name: "noticeOnPriorityPreemption", Value: "false", Source: "not set on ClusterQueue turns or a Cohort above it"},
				{Name: "noticeOnReclaim", Value: "false", Source: "not set on ClusterQueue turns or a Cohort above it"},
			},
			Admitted:     []app.AdmittedWorkload{},
			PendingOrder: "the scheduler's order, from the visibility API",
		}
		for _, j := range jobs {
			wl := workloadOf(g, ctx, j)
			if unsuspended(g, ctx, j) {
				qr, adm := condition(g, wl, kueue.WorkloadQuotaReserved), condition(g, wl, kueue.WorkloadAdmitted)
				want.Admitted = append(want.Admitted, app.AdmittedWorkload{Namespace: ns, Name: wl.Name, LocalQueue: "turns",
					QuotaReserved: &qr.LastTransitionTime, Admitted: &adm.LastTransitionTime,
					TurnEnds: &metav1.Time{Time: qr.LastTransitionTime.Add(5 * time.Minute)}, TurnSetting: "minAdmitDuration 5m0s", RunningCounted: "Admitted"})
			}
		}
		g.Expect(want.Admitted).To(gomega.HaveLen(1), "one job holds the quota")
		return want
	}

	var firstOrder []string
	ginkgo.It("shows the turn holder until when its turn lasts, and the others in the order they take theirs, in the manager's words", func() {
		var got app.ClusterQueueReport
		gomega.Eventually(func(g gomega.Gomega) {
			want := expected(g)
			r := queuesJSON(g, "turns")
			g.Expect(r.ClusterQueues).To(gomega.HaveLen(1))
			got = r.ClusterQueues[0]
			g.Expect(got.Pending).To(gomega.HaveLen(2))
			// Pending: positions from the visibility API, messages from each QuotaReserved condition,
			// estimates one turn apart from the holder's turn end, each once the victim's Pods have
			// had the default 30s grace period (HandoverAfterVictimTermination) and a handover of 1s.
			eta := want.Admitted[0].TurnEnds.Time
			for i, p := range got.Pending {
				var wl kueue.Workload
				g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: p.Name}, &wl)).To(gomega.Succeed())
				qr := condition(g, &wl, kueue.WorkloadQuotaReserved)
				g.Expect(qr.Message).NotTo(gomega.BeEmpty())
				if i > 0 {
					eta = eta.Add(5 * time.Minute)
				}
				eta = eta.Add(30*time.Second + time.Second)
				want.Pending = append(want.Pending, app.PendingWorkload{Position: i, Namespace: ns, Name: wl.Name, LocalQueue: "turns",
					Created: &wl.CreationTimestamp, Reason: qr.Reason, Message: qr.Message,
					ETA:      eta.UTC().Format(time.RFC3339),
					Estimate: fmt.Sprintf("expected around %s, %s in turn order; turns are 5m", eta.Local().Format("15:04"), []string{"1st", "2nd"}[i])})
			}
			g.Expect(cmp.Diff(want, got)).To(gomega.BeEmpty())
		}, timeout, interval).Should(gomega.Succeed())
		ginkgo.By("saying the waiting ones wait for the holder's window")
		gomega.Expect(got.Pending[0].Message).To(gomega.ContainSubstring("minAdmitDuration 5m0s"))
		for _, p := range got.Pending {
			firstOrder = append(firstOrder, p.Name)
		}

		ginkgo.By("printing the same in tables")
		// The scheduler may rewrite a waiting workload's message between two reads, so the table
		// is compared with the report read just before it.
		gomega.Eventually(func(g gomega.Gomega) {
			r := queuesJSON(g, "turns")
			g.Expect(r.ClusterQueues).To(gomega.HaveLen(1))
			now := r.ClusterQueues[0]
			code, out, errOut := run("queues", "turns")
			g.Expect(code).To(gomega.Equal(0), errOut)
			a := now.Admitted[0]
			want := [][]string{
				{"minAdmitDuration", "5m0s", "ClusterQueue turns"},
				{"preemptMinRuntime", "<none>", unknownDefault},
				{ns + "/" + a.Name, rfc3339(a.QuotaReserved.Time), "<none>", "<none>", rfc3339(a.TurnEnds.Time)},
				{"Pending in the scheduler's order, from the visibility API:"},
			}
			for _, p := range now.Pending {
				want = append(want, []string{fmt.Sprint(p.Position), ns + "/" + p.Name, p.Message})
			}
			for _, parts := range want {
				g.Expect(hasLine(out, parts...)).To(gomega.BeTrue(), "no line holds %q in order in:\n%s", parts, out)
			}
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("explaining each waiting workload with the same estimate, read from its LocalQueue")
		for _, p := range got.Pending {
			code, out, errOut := run("explain", "workload", p.Name, "-n", ns, "-o", "json")
			gomega.Expect(code).To(gomega.Equal(0), errOut)
			var r app.ExplainReport
			gomega.Expect(json.Unmarshal([]byte(out), &r)).To(gomega.Succeed())
			gomega.Expect([2]string{r.ETA, r.Estimate}).To(gomega.Equal([2]string{p.ETA, p.Estimate}), "the estimate of %s", p.Name)
			code, out, errOut = run("explain", "workload", p.Name, "-n", ns)
			gomega.Expect(code).To(gomega.Equal(0), errOut)
			ginkgo.GinkgoWriter.Println(out)
			expectLine(out, "Expected admission: "+p.Estimate)
		}
	})

	ginkgo.It("predicted the next turn: the first pending workload takes it once the window ends", func() {
		clk.Step(5*time.Minute + time.Second)
		gomega.Eventually(func(g gomega.Gomega) {
			r := queuesJSON(g, "turns")
			g.Expect(r.ClusterQueues[0].Admitted).To(gomega.HaveLen(1))
			g.Expect(r.ClusterQueues[0].Admitted[0].Name).To(gomega.Equal(firstOrder[0]))
			g.Expect(r.ClusterQueues[0].Admitted[0].Evicting).To(gomega.BeFalse())
			g.Expect(r.ClusterQueues[0].Pending).To(gomega.HaveLen(2))
			g.Expect(r.ClusterQueues[0].Pending[0].Name).To(gomega.Equal(firstOrder[1]), "the one that waited longer comes next")
		}, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("falls back to creation order, and says so, where the API server does not route the visibility API", func() {
		var out, errOut bytes.Buffer
		code := app.Run(ctx, []string{"--kubeconfig", kubeconfig, "queues", "turns", "-o", "json"}, app.Streams{Out: &out, ErrOut: &errOut}, app.Options{Now: clk.Now})
		gomega.Expect(code).To(gomega.Equal(0), errOut.String())
		var r app.QueuesReport
		gomega.Expect(json.Unmarshal(out.Bytes(), &r)).To(gomega.Succeed())
		gomega.Expect(r.ClusterQueues[0].PendingOrder).To(gomega.HavePrefix("creation order, not necessarily the scheduler's: the visibility API could not be read (the server could not find the requested resource"))
		gomega.Expect(r.ClusterQueues[0].Pending).To(gomega.HaveLen(2))

		ginkgo.By("and explains a waiting workload without an estimate, and without an error")
		out.Reset()
		errOut.Reset()
		code = app.Run(ctx, []string{"--kubeconfig", kubeconfig, "explain", "workload", r.ClusterQueues[0].Pending[0].Name, "-n", ns, "-o", "json"},
			app.Streams{Out: &out, ErrOut: &errOut}, app.Options{Now: clk.Now})
		gomega.Expect(code).To(gomega.Equal(0), errOut.String())
		var e app.ExplainReport
		gomega.Expect(json.Unmarshal(out.Bytes(), &e)).To(gomega.Succeed())
		gomega.Expect(e.State).To(gomega.Equal("waiting for quota"))
		gomega.Expect([2]string{e.ETA, e.Estimate}).To(gomega.Equal([2]string{"", ""}))
	})
})

var _ = ginkgo.Describe("kubectl timeshare on a workload protected by its Cohort's preemptMinRuntime", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns, managerConfig string
	var low, high *batchv1.Job
	var admitted time.Time
	const timeshare = "timeshare:\n  defaultReclaimMinRuntime: 2m\n"

	ginkgo.BeforeAll(func() {
		// The plugin is given the manager's own configuration section.
		gomega.Expect(env.Reconfigure(timeshare)).To(gomega.Succeed())
		managerConfig = filepath.Join(ginkgo.GinkgoT().TempDir(), "config.yaml")
		gomega.Expect(os.WriteFile(managerConfig, []byte("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"+timeshare), 0o600)).To(gomega.Succeed())
		ns = namespace(ctx, "protected")
		cohort(ctx, "research", "", map[string]any{"preemptMinRuntime": "10m"})
		gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns, "vision", "1", "research", map[string]any{"withinClusterQueue": "LowerPriority"})).To(gomega.Succeed())
		low, high = job(ns, "vision", "low", "1", "low"), job(ns, "vision", "high", "1", "high")
		gomega.Expect(env.Client.Create(ctx, low)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, low)).To(gomega.BeTrue())
			admitted = condition(g, workloadOf(g, ctx, low), kueue.WorkloadAdmitted).LastTransitionTime.Time
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, high)).To(gomega.Succeed())
	})

	ginkgo.It("says the running workload is protected until 10m after admission, by the Cohort's setting", func() {
		var got app.ClusterQueueReport
		gomega.Eventually(func(g gomega.Gomega) {
			r := queuesJSON(g, "vision", "--manager-config", managerConfig)
			g.Expect(r.ClusterQueues).To(gomega.HaveLen(1))
			got = r.ClusterQueues[0]
			g.Expect(got.Pending).To(gomega.HaveLen(1))
			g.Expect(got.Pending[0].Message).To(gomega.ContainSubstring("protected"))
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(got.Settings).To(gomega.Equal([]app.SettingReport{
			{Name: "minAdmitDuration", Source: "not set on ClusterQueue vision: no turns (upstream's same-priority rules)"},
			{Name: "preemptMinRuntime", Value: "10m0s", Source: "Cohort research"},
			{Name: "reclaimMinRuntime", Value: "2m0s", Source: "manager default"},
			{Name: "noticePeriod", Value: "0s", Source: "manager default: no notice"},
			{Name: "noticeOnPriorityPreemption", Value: "false", Source: "not set on ClusterQueue vision or a Cohort above it"},
			{Name: "noticeOnReclaim", Value: "false", Source: "not set on ClusterQueue vision or a Cohort above it"},
		}))
		gomega.Expect(got.Admitted).To(gomega.HaveLen(1))
		until := metav1.NewTime(admitted.Add(10 * time.Minute))
		reclaimUntil := metav1.NewTime(admitted.Add(2 * time.Minute))
		gomega.Expect(cmp.Diff([]app.Protection{
			{Kind: "preempt", Until: &until, Active: true, Source: "preemptMinRuntime 10m0s from Cohort research"},
			{Kind: "reclaim", Until: &reclaimUntil, Active: clk.Now().Before(reclaimUntil.Time), Source: "defaultReclaimMinRuntime 2m0s from the manager configuration"},
		}, got.Admitted[0].Protections)).To(gomega.BeEmpty())

		ginkgo.By("quoting the pending workload's QuotaReserved message as the manager wrote it")
		gomega.Eventually(func(g gomega.Gomega) {
			msg := condition(g, workloadOf(g, ctx, high), kueue.WorkloadQuotaReserved).Message
			g.Expect(msg).To(gomega.ContainSubstring("preemptMinRuntime 10m0s from Cohort research"))
			g.Expect(msg).To(gomega.ContainSubstring("the first protection ends at " + rfc3339(until.Time)))
			r := queuesJSON(g, "vision")
			g.Expect(r.ClusterQueues[0].Pending[0].Message).To(gomega.Equal(msg))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("printing the same in tables")
		code, out, errOut := run("queues", "vision", "--manager-config", managerConfig)
		gomega.Expect(code).To(gomega.Equal(0), errOut)
		ginkgo.GinkgoWriter.Println(out)
		expectLine(out, "ClusterQueue vision (Cohort research)")
		expectLine(out, "preemptMinRuntime", "10m0s", "Cohort research")
		expectLine(out, "reclaimMinRuntime", "2m0s", "manager default")
		expectLine(out, ns+"/"+got.Admitted[0].Name, rfc3339(until.Time), "preemptMinRuntime 10m0s from Cohort research")

		ginkgo.By("saying the defaults are not known without --manager-config")
		code, out, errOut = run("queues", "vision", "-o", "wide")
		gomega.Expect(code).To(gomega.Equal(0), errOut)
		expectLine(out, "reclaimMinRuntime", "<none>", unknownDefault)
		expectLine(out, ns+"/"+got.Admitted[0].Name, "vision", "Admitted", "holding")
	})

	ginkgo.It("explains the waiting workload with the manager's own message", func() {
		var wl *kueue.Workload
		var qr metav1.Condition
		gomega.Eventually(func(g gomega.Gomega) {
			wl = workloadOf(g, ctx, high)
			qr = condition(g, wl, kueue.WorkloadQuotaReserved)
			g.Expect(qr.Message).To(gomega.ContainSubstring("protected"))
		}, timeout, interval).Should(gomega.Succeed())
		code, out, errOut := run("explain", "workload", wl.Name, "-n", ns, "-o", "json")
		gomega.Expect(code).To(gomega.Equal(0), errOut)
		var r app.ExplainReport
		gomega.Expect(json.Unmarshal([]byte(out), &r)).To(gomega.Succeed())
		gomega.Expect(r.State).To(gomega.Equal("waiting for quota"))
		gomega.Expect(r.LastPreemption).To(gomega.BeNil())
		gomega.Expect(cmp.Diff(&app.Decision{Condition: kueue.WorkloadQuotaReserved, Status: "False",
			Reason: qr.Reason, Message: qr.Message, Since: &qr.LastTransitionTime}, r.Wait)).To(gomega.BeEmpty())

		code, out, errOut = run("explain", "workload", wl.Name, "-n", ns)
		gomega.Expect(code).To(gomega.Equal(0), errOut)
		ginkgo.GinkgoWriter.Println(out)
		expectLine(out, "Why it waits (QuotaReserved=False, reason "+qr.Reason)
		expectLine(out, qr.Message)
	})

	ginkgo.It("explains the preemption once the protection ends: the rule, the eviction and the requeue", func() {
		clk.SetTime(admitted.Add(10 * time.Minute))
		var wl *kueue.Workload
		var preempted metav1.Condition
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, high)).To(gomega.BeTrue())
			wl = workloadOf(g, ctx, low)
			preempted = condition(g, wl, kueue.WorkloadPreempted)
			g.Expect(preempted.Reason).To(gomega.Equal(kueue.InClusterQueueReason))
		}, timeout, interval).Should(gomega.Succeed())
		var r app.ExplainReport
		gomega.Eventually(func(g gomega.Gomega) {
			code, out, errOut := run("explain", "workload", wl.Name, "-n", ns, "-o", "json")
			g.Expect(code).To(gomega.Equal(0), errOut)
			g.Expect(json.Unmarshal([]byte(out), &r)).To(gomega.Succeed())
			g.Expect(r.History).To(gomega.ContainElement(gomega.And(
				gomega.HaveField("Source", "event"), gomega.HaveField("Reason", "Preempted"))), "the manager's Preempted event")
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(cmp.Diff(&app.Decision{Condition: kueue.WorkloadPreempted, Status: "True", Reason: kueue.InClusterQueueReason,
			Message: preempted.Message, Since: &preempted.LastTransitionTime}, r.LastPreemption)).To(gomega.BeEmpty())
		ginkgo.By("and, requeued, why it waits now")
		gomega.Expect(r.State).To(gomega.Equal("waiting for quota"))
		gomega.Expect(r.Wait).NotTo(gomega.BeNil())
		gomega.Expect(r.Wait.Message).To(gomega.Equal(condition(gomega.Default, workloadOf(gomega.Default, ctx, low), kueue.WorkloadQuotaReserved).Message))
		gomega.Expect(r.History).To(gomega.ContainElement(gomega.And(
			gomega.HaveField("Source", "condition"), gomega.HaveField("What", "Requeued=True"))))
		gomega.Expect(r.History).To(gomega.ContainElement(gomega.And(
			gomega.HaveField("Source", "condition"), gomega.HaveField("What", "Evicted=True"), gomega.HaveField("Reason", kueue.WorkloadEvictedByPreemption))))
		gomega.Expect(r.Evictions).To(gomega.ContainElement(gomega.HaveField("Reason", kueue.WorkloadEvictedByPreemption)))

		code, out, errOut := run("explain", "workload", wl.Name, "-n", ns)
		gomega.Expect(code).To(gomega.Equal(0), errOut)
		ginkgo.GinkgoWriter.Println(out)
		expectLine(out, "Its last preemption (Preempted=True, reason "+kueue.InClusterQueueReason)
		expectLine(out, preempted.Message)
	})
})

var _ = ginkgo.Describe("kubectl timeshare on bad input", func() {
	ginkgo.DescribeTable("names the object or the format and exits non-zero",
		func(args []string, message string) {
			var out, errOut bytes.Buffer
			code := app.Run(context.Background(), append([]string{"--kubeconfig", kubeconfig}, args...), app.Streams{Out: &out, ErrOut: &errOut}, app.Options{})
			gomega.Expect(code).To(gomega.Equal(1))
			gomega.Expect(errOut.String()).To(gomega.Equal("error: " + message + "\n"))
			gomega.Expect(out.String()).To(gomega.BeEmpty())
		},
		ginkgo.Entry("an unknown ClusterQueue", []string{"queues", "no-such-queue"}, `ClusterQueue "no-such-queue" not found`),
		ginkgo.Entry("an unknown Workload", []string{"explain", "workload", "no-such-workload", "-n", "default"}, `Workload "no-such-workload" not found in namespace "default"`),
		ginkgo.Entry("an unknown output format", []string{"queues", "-o", "xml"}, `unable to match a printer suitable for the output format "xml", allowed formats are: json, yaml, wide`),
	)

	ginkgo.It("names the field of a bad manager configuration", func() {
		file := filepath.Join(ginkgo.GinkgoT().TempDir(), "config.yaml")
		gomega.Expect(os.WriteFile(file, []byte("timeshare:\n  reclaimResolveMethod: Root\n"), 0o600)).To(gomega.Succeed())
		code, out, errOut := run("queues", "--manager-config", file)
		gomega.Expect(code).To(gomega.Equal(1))
		gomega.Expect(out).To(gomega.BeEmpty())
		gomega.Expect(errOut).To(gomega.Equal("error: --manager-config " + file + `: timeshare.reclaimResolveMethod: Unsupported value: "Root": supported values: "LCA", "Queue"` + "\n"))
	})
})

// expectLine fails unless some line of out holds every part, in order.
func expectLine(out string, parts ...string) {
	ginkgo.GinkgoHelper()
	if !hasLine(out, parts...) {
		ginkgo.Fail(fmt.Sprintf("no line holds %q in order in:\n%s", parts, out))
	}
}

// hasLine says whether some line of out holds every part, in order.
func hasLine(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, p := range parts {
			i := strings.Index(rest, p)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(p):]
		}
		if ok {
			return true
		}
	}
	return false
}
