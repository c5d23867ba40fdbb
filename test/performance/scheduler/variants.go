package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/generator"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	tsfeatures "github.com/kueue-timeshare/kueue-timeshare/pkg/features"
)

// variant is one way of running the same generated load.
type variant struct {
	// name is the short name used in flags, file names and ratios.
	name string
	// title describes the run in the report.
	title string
	// upstream runs upstream's admission loop (manager.Options.UpstreamScheduler).
	upstream bool
	// gates are feature gates set in the manager's configuration, beyond the local defaults.
	gates map[string]bool
	// minAdmitDuration, when set, goes on every ClusterQueue, whose withinClusterQueue policy then
	// becomes LowerOrNewerEqualPriority, the only policy that accepts it.
	minAdmitDuration time.Duration
	// headsPerCycle, when set, is the manager's timeshare.headsPerCycle.
	headsPerCycle int
	// writers, when set, is the manager's timeshare.pendingStatusWriters; unset, the
	// configuration's default.
	writers *int
	// estimateRefresh, when set, is the manager's timeshare.admissionEstimates.refreshInterval;
	// unset, the configuration's default.
	estimateRefresh *time.Duration
}

// variants returns the runs, in the order they execute, that names selects (all when empty);
// heads is the "heads" run's timeshare.headsPerCycle.
func variants(names []string, window time.Duration, heads int) ([]variant, error) {
	ourGatesOff := map[string]bool{}
	for _, g := range []string{
		string(tsfeatures.TimeBasedSamePriorityPreemption), string(tsfeatures.MinRuntimeProtection),
		string(tsfeatures.PreemptionToleration), string(tsfeatures.ExpectedRuntimeRequeue),
	} {
		ourGatesOff[g] = false
	}
	all := []variant{
		// Our gates off in the baseline too: the manager binary is ours, and with them on its
		// waker would sweep beside upstream's scheduler, a cost upstream Kueue does not have.
		{name: "upstream", title: "(a) upstream's scheduler", upstream: true, gates: ourGatesOff},
		{name: "off", title: "(b) ours, features off", gates: ourGatesOff},
		{name: "on", title: fmt.Sprintf("(c) ours, minAdmitDuration %s on every ClusterQueue", window), minAdmitDuration: window},
		{name: "heads", title: fmt.Sprintf("(d) ours, features off, headsPerCycle %d", heads), gates: ourGatesOff, headsPerCycle: heads},
		// The pending statuses written inline, as upstream does, beside "heads" with the default.
		{name: "heads0", title: fmt.Sprintf("(e) ours, features off, headsPerCycle %d, pendingStatusWriters 0", heads), gates: ourGatesOff, headsPerCycle: heads, writers: ptr.To(0)},
		// "off" without the admission estimates' refresh, to measure what it costs.
		{name: "est0", title: "(f) ours, features off, admissionEstimates.refreshInterval 0s", gates: ourGatesOff, estimateRefresh: ptr.To(time.Duration(0))},
	}
	if len(names) == 0 {
		return all, nil
	}
	var out []variant
	for _, n := range names {
		if v, ok, err := headsVariant(strings.TrimSpace(n), ourGatesOff); ok || err != nil {
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			continue
		}
		found := false
		for _, v := range all {
			if v.name == strings.TrimSpace(n) {
				out, found = append(out, v), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown variant %q (known: upstream, off, on, heads, heads0, est0, heads=N)", n)
		}
	}
	return out, nil
}

// headsVariant reads "heads=N": ours with our gates off and timeshare.headsPerCycle N, so that one
// invocation can compare several values. ok is false for any other name.
func headsVariant(name string, gates map[string]bool) (v variant, ok bool, err error) {
	value, found := strings.CutPrefix(name, "heads=")
	if !found {
		return variant{}, false, nil
	}
	n, err := strconv.Atoi(value)
	if err != nil || n < 1 {
		return variant{}, true, fmt.Errorf("variant %q: headsPerCycle must be a whole number of at least 1", name)
	}
	return variant{name: name, title: fmt.Sprintf("ours, features off, headsPerCycle %d", n), gates: gates, headsPerCycle: n}, true, nil
}

// withWriters sets timeshare.pendingStatusWriters to n on our variants that do not set it.
func withWriters(vs []variant, n int) {
	for i := range vs {
		if !vs[i].upstream && vs[i].writers == nil {
			vs[i].writers = ptr.To(n)
			vs[i].title += fmt.Sprintf(", pendingStatusWriters %d", n)
		}
	}
}

// timeshareSection is the manager configuration's timeshare section for v, empty when v sets
// nothing in it.
func timeshareSection(v variant) string {
	var b strings.Builder
	if v.headsPerCycle > 0 {
		fmt.Fprintf(&b, "  headsPerCycle: %d\n", v.headsPerCycle)
	}
	if v.writers != nil {
		fmt.Fprintf(&b, "  pendingStatusWriters: %d\n", *v.writers)
	}
	if v.estimateRefresh != nil {
		fmt.Fprintf(&b, "  admissionEstimates:\n    refreshInterval: %s\n", *v.estimateRefresh)
	}
	if b.Len() == 0 {
		return ""
	}
	return "timeshare:\n" + b.String()
}

// prepareConfig applies the scale and the variant's policy to a copy of the generator's config.
func prepareConfig(base *generator.Config, scale float64, v variant) (*generator.Config, error) {
	cfg, err := copyConfig(base)
	if err != nil {
		return nil, err
	}
	for i := range cfg.Cohorts {
		for j := range cfg.Cohorts[i].QueuesSets {
			qs := &cfg.Cohorts[i].QueuesSets[j]
			if v.minAdmitDuration > 0 {
				qs.WithinClusterQueue = kueue.PreemptionPolicyLowerOrNewerEqualPriority
			}
			for k := range qs.WorkloadsSets {
				ws := &qs.WorkloadsSets[k]
				ws.Count = scaledCount(ws.Count, scale)
			}
		}
	}
	return cfg, nil
}

// scaledCount keeps at least one workload per set, so that every class still shows up.
func scaledCount(n int, scale float64) int {
	if scale >= 1 || n == 0 {
		return n
	}
	return max(1, int(math.Ceil(float64(n)*scale)))
}

// workloadCount is how many workloads the generator creates for cfg.
func workloadCount(cfg *generator.Config) (workloads, clusterQueues int) {
	for _, c := range cfg.Cohorts {
		for _, qs := range c.QueuesSets {
			clusterQueues += c.Count * qs.Count
			for _, ws := range qs.WorkloadsSets {
				workloads += c.Count * qs.Count * ws.Count * len(ws.Workloads)
			}
		}
	}
	return workloads, clusterQueues
}

// generatorClient is the client upstream's generator creates objects with. Every ClusterQueue
// gets Kueue's resource-in-use finalizer at creation, as Kueue's defaulting webhook would add it:
// without that webhook (upstream's runner installs none), Kueue's ClusterQueue controller adds
// the finalizer with a full Update of its typed object, which drops the fields that type does not
// have, minAdmitDuration among them. A ResourceFlavor that exists already is left as it is: the
// generator creates its flavor in every call, and a load's setup and measured part are two calls.
// With hold set, every ClusterQueue is created with stopPolicy Hold, so that its workloads wait
// until the run releases it. With window set, each ClusterQueue also gets
// spec.preemption.withinClusterQueueConfig.minAdmitDuration; upstream's typed ClusterQueue has no
// such field, so the object is sent unstructured. Everything else passes through.
type generatorClient struct {
	client.Client
	window time.Duration
	hold   bool
}

func (c generatorClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*kueue.ResourceFlavor); ok {
		return client.IgnoreAlreadyExists(c.Client.Create(ctx, obj, opts...))
	}
	cq, ok := obj.(*kueue.ClusterQueue)
	if !ok {
		return c.Client.Create(ctx, obj, opts...)
	}
	controllerutil.AddFinalizer(cq, kueue.ResourceInUseFinalizerName)
	if c.hold {
		cq.Spec.StopPolicy = ptr.To(kueue.Hold)
	}
	if c.window == 0 {
		return c.Client.Create(ctx, cq, opts...)
	}
	u, err := withMinAdmitDuration(cq, c.window)
	if err != nil {
		return err
	}
	if err := c.Client.Create(ctx, u, opts...); err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cq)
}

// withMinAdmitDuration renders cq with the window, checked by the same rules as our webhook.
func withMinAdmitDuration(cq *kueue.ClusterQueue, window time.Duration) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cq)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("ClusterQueue"))
	delete(u.Object, "status")
	if err := unstructured.SetNestedField(u.Object, window.String(), "spec", "preemption", "withinClusterQueueConfig", "minAdmitDuration"); err != nil {
		return nil, err
	}
	spec, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return nil, err
	}
	ext, err := tsapi.ParseClusterQueueExtension(spec)
	if err != nil {
		return nil, err
	}
	if errs := tsapi.ValidateClusterQueueExtension(ext, cq.Spec.Preemption); len(errs) > 0 {
		return nil, fmt.Errorf("ClusterQueue %s: %w", cq.Name, errs.ToAggregate())
	}
	return u, nil
}
