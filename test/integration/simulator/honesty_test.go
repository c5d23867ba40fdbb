package simulator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// step is one instant of a simulation at which something happens: jobs arrive, jobs finish, and
// the scheduler admits and preempts.
type step struct {
	at       time.Duration
	arrive   []simulator.WorkloadSpec
	finish   []string
	expected []string
}

var _ = ginkgo.Describe("The simulator and the manager", func() {
	ctx := context.Background()

	ginkgo.DescribeTable("admit and preempt the same workloads, in the same order, for the same reasons",
		func(file string) {
			sc, err := simulator.Load(filepath.Join("testdata", file))
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			sim, err := simulator.Run(ctx, sc, simulator.Options{})
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			steps := plan(sc, sim)
			ginkgo.GinkgoWriter.Printf("simulated: %+v\n", steps)

			namespace := createObjects(ctx, sc)
			seen.reset(namespace)
			start := clk.Now()
			jobs := map[string]*batchv1.Job{}
			var want [][]string
			var bounds []int
			for _, s := range steps {
				clk.SetTime(start.Add(s.at))
				for _, name := range s.finish {
					complete(ctx, jobs[name])
				}
				for _, w := range s.arrive {
					jobs[w.Name] = submit(ctx, w)
				}
				want = append(want, s.expected)
				ginkgo.By(fmt.Sprintf("at +%s: %v", s.at, s.expected))
				gomega.Eventually(func(g gomega.Gomega) {
					got := bySteps(seen.list(), bounds)
					g.Expect(got).To(gomega.Equal(sorted(want)))
				}, timeout, interval).Should(gomega.Succeed())
				bounds = append(bounds, len(seen.list()))
			}
			ginkgo.By("doing nothing more")
			gomega.Consistently(func(g gomega.Gomega) {
				g.Expect(seen.list()).To(gomega.HaveLen(bounds[len(bounds)-1]))
			}, 2*time.Second, interval).Should(gomega.Succeed())
		},
		ginkgo.Entry("three same-priority jobs taking turns (minAdmitDuration 1m)", "time-sharing.yaml"),
		ginkgo.Entry("reclaim and in-queue preemption held back by min-runtimes", "min-runtime.yaml"),
		ginkgo.Entry("a rotated-out workload takes idle quota while the next turn waits for a window", "step-aside.yaml"),
	)
})

// plan turns a simulation into the steps to replay: when each job arrives, when it finishes, and
// what the scheduler does at that instant.
func plan(sc *simulator.Scenario, sim *simulator.Result) []step {
	byTime := map[time.Duration]*step{}
	at := func(t time.Duration) *step {
		if byTime[t] == nil {
			byTime[t] = &step{at: t}
		}
		return byTime[t]
	}
	for _, w := range sc.WorkloadSpecs() {
		s := at(w.Arrival)
		s.arrive = append(s.arrive, w)
	}
	for _, e := range sim.Events {
		switch e.Kind {
		case simulator.EventAdmitted:
			at(e.At).expected = append(at(e.At).expected, e.Workload+" admitted")
		case simulator.EventPreempted:
			at(e.At).expected = append(at(e.At).expected, e.Workload+" preempted ("+e.Reason+")")
		case simulator.EventEvicted:
			at(e.At).expected = append(at(e.At).expected, e.Workload+" evicted ("+e.Reason+")")
		case simulator.EventFinished:
			s := at(e.At)
			s.finish = append(s.finish, e.Workload)
			s.expected = append(s.expected, e.Workload+" finished")
		}
	}
	var out []step
	for _, s := range byTime {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b step) int { return int(a.at - b.at) })
	return out
}

// bySteps cuts the observed events at the given bounds; the last part is the current step.
func bySteps(events []string, bounds []int) [][]string {
	var out [][]string
	from := 0
	for _, b := range bounds {
		out = append(out, events[from:min(b, len(events))])
		from = min(b, len(events))
	}
	out = append(out, events[from:])
	return sorted(out)
}

// sorted orders the events within each step: several things may happen at one instant, in an
// order neither run promises (two victims of one preemption, for instance).
func sorted(steps [][]string) [][]string {
	out := make([][]string, len(steps))
	for i, s := range steps {
		out[i] = append([]string{}, s...)
		slices.Sort(out[i])
	}
	return out
}

// createObjects creates the scenario's objects on the API server and returns the namespace of
// its workloads (the scenarios here use one).
func createObjects(ctx context.Context, sc *simulator.Scenario) string {
	ginkgo.GinkgoHelper()
	objs := &sc.Objects
	var all []client.Object
	for _, o := range objs.Namespaces {
		all = append(all, o)
	}
	for _, o := range objs.Flavors {
		all = append(all, o)
	}
	for _, o := range objs.WorkloadPriorityClasses {
		all = append(all, o)
	}
	for _, o := range objs.PriorityClasses {
		all = append(all, o)
	}
	for _, o := range objs.Cohorts {
		all = append(all, o)
	}
	for _, o := range objs.ClusterQueues {
		all = append(all, o)
	}
	for _, o := range objs.LocalQueues {
		all = append(all, o)
	}
	for _, o := range all {
		// The default flavor is shared between scenarios.
		if err := env.Client.Create(ctx, o); !apierrors.IsAlreadyExists(err) {
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
		}
	}
	gomega.Expect(objs.Namespaces).To(gomega.HaveLen(1))
	return objs.Namespaces[0].Name
}

// submit creates the Job of w and waits until Kueue made its Workload; then it waits for the
// wall clock's next second, so that the next Workload's creation time (which orders the queue) is
// later, as the next arrival is in the simulation.
func submit(ctx context.Context, w simulator.WorkloadSpec) *batchv1.Job {
	ginkgo.GinkgoHelper()
	tmpl := w.PodTemplate()
	labels := map[string]string{constants.QueueLabel: w.LocalQueue}
	switch w.PriorityKind {
	case kueue.WorkloadPriorityClassKind:
		labels[constants.WorkloadPriorityClassLabel] = w.PriorityClass
	case kueue.PodPriorityClassKind:
		tmpl.Spec.PriorityClassName = w.PriorityClass
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name, Labels: labels, Annotations: w.Annotations},
		Spec:       batchv1.JobSpec{Parallelism: ptr.To(w.Pods), Completions: ptr.To(w.Pods), Template: tmpl},
	}
	gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
	var created time.Time
	gomega.Eventually(func(g gomega.Gomega) {
		created = util.WorkloadOf(g, ctx, env.Client, j).CreationTimestamp.Time
	}, timeout, interval).Should(gomega.Succeed())
	gomega.Eventually(func() bool { return time.Now().Truncate(time.Second).After(created) }, timeout, 50*time.Millisecond).Should(gomega.BeTrue())
	return j
}

// complete reports j as finished, as the Job controller would once its pods succeeded.
func complete(ctx context.Context, j *batchv1.Job) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		util.CompleteJob(g, ctx, env.Client, j)
	}, timeout, interval).Should(gomega.Succeed())
}
