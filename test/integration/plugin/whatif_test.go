package plugin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/cmd/kubectl-timeshare/app"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// proposal writes the ClusterQueue manifest name (1 cpu, turns of window) to a file.
func proposal(name, window string) string {
	ginkgo.GinkgoHelper()
	u, err := util.RawCPUClusterQueue(name, "1", map[string]any{
		"withinClusterQueue":       "LowerOrNewerEqualPriority",
		"withinClusterQueueConfig": map[string]any{"minAdmitDuration": window},
	})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	data, err := yaml.Marshal(u.Object)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	file := filepath.Join(ginkgo.GinkgoT().TempDir(), "proposed.yaml")
	gomega.Expect(os.WriteFile(file, data, 0o600)).To(gomega.Succeed())
	return file
}

// holder returns the one workload of jobs holding quota, failing g unless exactly one does.
func holder(g gomega.Gomega, ctx context.Context, jobs []*batchv1.Job) *kueue.Workload {
	var holding []*kueue.Workload
	for _, j := range jobs {
		wl := workloadOf(g, ctx, j)
		if wl.Status.Admission != nil && condition(g, wl, kueue.WorkloadQuotaReserved).Status == "True" {
			holding = append(holding, wl)
		}
	}
	g.Expect(holding).To(gomega.HaveLen(1), "one workload holds the quota")
	return holding[0]
}

var _ = ginkgo.Describe("kubectl timeshare what-if on a ClusterQueue taking turns", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string
	var jobs []*batchv1.Job
	var second *kueue.Workload

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		ns = namespace(ctx, "whatif")
		gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns, "rotate", "1", "", map[string]any{
			"withinClusterQueue":       "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "5m"},
		})).To(gomega.Succeed())
		for _, name := range []string{"a", "b", "c"} {
			j := job(ns, "rotate", name, "1", "")
			gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
			jobs = append(jobs, j)
		}
		var first *kueue.Workload
		gomega.Eventually(func(g gomega.Gomega) { first = holder(g, ctx, jobs) }, timeout, interval).Should(gomega.Succeed())
		ginkgo.By("letting one turn pass, so that one pending workload was rotated out and one never ran")
		clk.Step(5*time.Minute + time.Second)
		gomega.Eventually(func(g gomega.Gomega) {
			second = holder(g, ctx, jobs)
			g.Expect(second.Name).NotTo(gomega.Equal(first.Name))
			var wl kueue.Workload
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(first), &wl)).To(gomega.Succeed())
			g.Expect(condition(g, &wl, kueue.WorkloadPreempted).Reason).To(gomega.Equal(timebased.Reason))
			g.Expect(condition(g, &wl, kueue.WorkloadRequeued).Status).To(gomega.BeEquivalentTo("True"))
		}, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("predicts the next turn that the manager then takes, and when", func() {
		file := proposal("rotate", "10m")
		scenario := filepath.Join(ginkgo.GinkgoT().TempDir(), "snapshot.yaml")
		code, out, errOut := run("what-if", "-f", file, "rotate", "--for", "1h", "--assume-runtime", "2h", "--save-scenario", scenario, "-o", "json")
		gomega.Expect(code).To(gomega.Equal(0), errOut)
		var r app.WhatIfReport
		gomega.Expect(json.Unmarshal([]byte(out), &r)).To(gomega.Succeed(), out)
		gomega.Expect(r.Proposed).To(gomega.Equal([]string{"ClusterQueue rotate"}))
		gomega.Expect(r.ClusterQueues).To(gomega.HaveLen(1))
		q := r.ClusterQueues[0]
		gomega.Expect(q.Current.NextAdmitted).NotTo(gomega.BeNil())
		predicted := q.Current.NextAdmitted
		gomega.Expect(predicted.Workload).NotTo(gomega.Equal(second.Name))
		turnEnds := condition(gomega.Default, second, kueue.WorkloadQuotaReserved).LastTransitionTime.Add(5 * time.Minute)
		gomega.Expect(predicted.At.Time).To(gomega.BeTemporally("~", turnEnds, time.Second), "the turn passes when the holder's window ends")

		ginkgo.By("with a 10m window the same workload waits five minutes more, and the runs part there")
		gomega.Expect(q.Proposed.NextAdmitted).NotTo(gomega.BeNil())
		gomega.Expect(q.Proposed.NextAdmitted.Workload).To(gomega.Equal(predicted.Workload))
		gomega.Expect(q.Proposed.NextAdmitted.At.Time).To(gomega.BeTemporally("~", turnEnds.Add(5*time.Minute), time.Second))
		gomega.Expect(r.FirstDifference).NotTo(gomega.BeNil())
		gomega.Expect(r.FirstDifference.Current[0].Kind).To(gomega.Equal("preempted"))
		gomega.Expect(r.FirstDifference.Current[0].Workload).To(gomega.Equal(second.Name))
		gomega.Expect(r.FirstDifference.Current[0].By).To(gomega.Equal(predicted.Workload))
		ginkgo.By("saying which run time each workload was given")
		gomega.Expect(r.Workloads).To(gomega.HaveLen(3))
		for _, w := range r.Workloads {
			gomega.Expect(w.RuntimeSource).To(gomega.Equal(app.RuntimeAssumed))
			gomega.Expect(w.RuntimeSeconds).To(gomega.Equal((2 * time.Hour).Seconds()))
		}

		ginkgo.By("saving, as Kueue's manifests and the workloads, a scenario that the simulator runs to the same next turn")
		data, err := os.ReadFile(scenario)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(string(data)).To(gomega.ContainSubstring("kind: ClusterQueue"))
		gomega.Expect(string(data)).To(gomega.ContainSubstring("quotaReserved:"))
		sc, err := simulator.Load(scenario)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		res, err := simulator.Run(ctx, sc, simulator.Options{})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var first *simulator.Event
		for i, e := range res.Events {
			if e.Kind == simulator.EventAdmitted && e.At > 0 && e.ClusterQueue == "rotate" {
				first = &res.Events[i]
				break
			}
		}
		gomega.Expect(first).NotTo(gomega.BeNil())
		gomega.Expect(first.Workload).To(gomega.Equal(predicted.Workload))
		gomega.Expect(res.Start.Add(first.At)).To(gomega.BeTemporally("~", predicted.At.Time, time.Second))

		ginkgo.By("printing the comparison in tables")
		code, table, errOut := run("what-if", "-f", file, "rotate", "--for", "1h", "--assume-runtime", "2h")
		gomega.Expect(code).To(gomega.Equal(0), errOut)
		ginkgo.GinkgoWriter.Println(table)
		expectLine(table, "rotate", "3", predicted.Workload+" at +", " / "+predicted.Workload+" at +")
		expectLine(table, ns+"/"+predicted.Workload, "rotate", "2h", app.RuntimeAssumed)
		expectLine(table, "First decisions that differ:")

		ginkgo.By("letting the holder's window end in the manager")
		clk.SetTime(turnEnds.Add(time.Second))
		gomega.Eventually(func(g gomega.Gomega) {
			next := holder(g, ctx, jobs)
			g.Expect(next.Name).NotTo(gomega.Equal(second.Name), "the turn passed")
			g.Expect(next.Name).To(gomega.Equal(predicted.Workload))
		}, timeout, interval).Should(gomega.Succeed())
	})
})

var _ = ginkgo.Describe("kubectl timeshare what-if on bad input", func() {
	ginkgo.It("gives the webhook's own message for a proposed ClusterQueue it would reject, and exits non-zero", func() {
		ctx := context.Background()
		file := proposal("any-queue", "30s")
		code, out, errOut := run("what-if", "-f", file)
		gomega.Expect(code).To(gomega.Equal(1))
		gomega.Expect(out).To(gomega.BeEmpty())

		ginkgo.By("the API server refusing the same manifest with the same message")
		data, err := os.ReadFile(file)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		u := &unstructured.Unstructured{}
		gomega.Expect(yaml.Unmarshal(data, &u.Object)).To(gomega.Succeed())
		apiErr := env.Client.Create(ctx, u, client.DryRunAll)
		gomega.Expect(apiErr).To(gomega.HaveOccurred())
		const field = `spec.preemption.withinClusterQueueConfig.minAdmitDuration: Invalid value: "30s": must be at least 1m0s`
		gomega.Expect(apiErr.Error()).To(gomega.ContainSubstring(field))
		gomega.Expect(errOut).To(gomega.Equal("error: proposed.yaml: document 1 (ClusterQueue any-queue): the ClusterQueue webhook would reject it: " +
			`ClusterQueue.kueue.x-k8s.io "any-queue" is invalid: ` + field + "\n"))
	})

	ginkgo.It("names a proposed ClusterQueue that is not in the cluster", func() {
		code, _, errOut := run("what-if", "-f", proposal("no-such-queue", "5m"), "--assume-runtime", "1h")
		gomega.Expect(code).To(gomega.Equal(1))
		gomega.Expect(errOut).To(gomega.HavePrefix(`error: proposed.yaml: ClusterQueue "no-such-queue" is not in the cluster`))
	})

	ginkgo.It("names an unknown ClusterQueue to show", func() {
		code, _, errOut := run("what-if", "-f", proposal("rotate", "5m"), "no-such-queue")
		gomega.Expect(code).To(gomega.Equal(1))
		gomega.Expect(errOut).To(gomega.Equal("error: ClusterQueue \"no-such-queue\" not found\n"))
	})
})
