package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/generator"
)

// Upstream's generator configurations, inside the Kueue module.
const (
	baselineConfig = "test/performance/scheduler/configs/baseline/generator.yaml"
	tasConfig      = "test/performance/scheduler/configs/tas/generator.yaml"
	largeConfig    = "test/performance/scheduler/configs/large-scale/generator.yaml"
)

// upstreamConfigs are the loads read from upstream's generator configurations, by name.
var upstreamConfigs = map[string]string{"baseline": baselineConfig, "tas": tasConfig, "large": largeConfig}

// loadNames are the values of -load.
var loadNames = []string{"baseline", "tas", "large", "deep", "slowcycle"}

// load is what one invocation plays in every run.
type load struct {
	name string
	// shown names the configuration in the report.
	shown string
	// setup is created before the clock starts and, when it has workloads, until all of them are
	// admitted; nil for none. It holds what the measured part needs but is not measured: TAS
	// nodes, topology and flavor, or the deep load's running workloads.
	setup *generator.Config
	// cfg is the measured part, already scaled.
	cfg *generator.Config
	// background are workload classes that run through the whole measurement and are left out of
	// every figure (the deep load's setup workloads).
	background []string
	// hold: the measured workloads are all created, with their ClusterQueues held, before the
	// clock starts; the clock starts when the ClusterQueues are released. Without it the deep load
	// would measure how fast the API server creates workloads.
	hold bool
	// untilAdmitted ends the run when every measured workload is admitted: its workloads run
	// longer than any run, so the figure is how fast the scheduler fills the quota.
	untilAdmitted bool
}

// Shape of the deep load at scale 1, after upstream issue 14477: deepQueues ClusterQueues in one
// cohort, each with deepWorkloads one-CPU workloads created at once and quota for deepQuota of
// them; beside them backgroundQueues ClusterQueues, each holding backgroundWorkloads workloads
// admitted before the clock starts and running longer than any run, so that every snapshot is
// large. Workloads are created in sets of createBatch, which the generator creates concurrently.
const (
	deepQueues          = 3
	deepWorkloads       = 500
	deepQuota           = 200
	deepRuntime         = 2 * time.Second
	backgroundQueues    = 20
	backgroundWorkloads = 150
	backgroundRuntime   = 24 * time.Hour
	createBatch         = 50

	deepClass       = "deep"
	backgroundClass = "background"
)

// buildLoad returns the named load at scale. path is a generator configuration for baseline, tas
// and large (empty for upstream's, found in moduleDir); shownModule prefixes upstream's path in the report.
func buildLoad(name, path, moduleDir, shownModule string, scale float64) (*load, error) {
	switch name {
	case "baseline", "tas", "large":
		shown := path
		if path == "" {
			rel := upstreamConfigs[name]
			path, shown = filepath.Join(moduleDir, rel), shownModule+"/"+rel
		}
		base, err := generator.LoadConfig(path)
		if err != nil {
			return nil, err
		}
		cfg, err := prepareConfig(base, scale, variant{})
		if err != nil {
			return nil, err
		}
		l := &load{name: name, shown: shown, cfg: cfg}
		if cfg.Topology != nil {
			// Nodes, topology and flavor first: upstream's runner creates them inside its clock,
			// which would count 640 nodes' creation as scheduling time.
			l.setup = &generator.Config{Topology: cfg.Topology, ResourceFlavor: cfg.ResourceFlavor}
			cfg.Topology = nil
		}
		return l, nil
	case "deep", "slowcycle":
		if path != "" {
			return nil, fmt.Errorf("-generator-config does not apply to -load %s", name)
		}
		l := &load{name: name, background: []string{backgroundClass}, hold: true}
		if name == "deep" {
			l.setup, l.cfg = deepLoad(scale)
			l.shown = fmt.Sprintf("deep-queue load (%d ClusterQueues of %d workloads, quota for %d each; %d running in %d other ClusterQueues, at scale 1)",
				deepQueues, deepWorkloads, deepQuota, backgroundQueues*backgroundWorkloads, backgroundQueues)
		} else {
			l.setup, l.cfg = slowCycleLoad(scale)
			l.shown = fmt.Sprintf("slow-cycle load (%d ClusterQueues of %d topology-placed workloads, quota for all; %d admitted in %d other ClusterQueues on %d nodes, at scale 1)",
				deepQueues, slowDeepWorkloads, backgroundQueues*slowBackgroundWorkloads, backgroundQueues, slowRacks*slowNodesPerRack)
			l.untilAdmitted = true
		}
		return l, nil
	}
	return nil, fmt.Errorf("unknown load %q (known: %v)", name, loadNames)
}

// deepLoad builds the deep load at scale: counts and quotas scale together, runtimes do not.
func deepLoad(scale float64) (setup, measured *generator.Config) {
	queues := func(class string, count, workloads, quota int, runtime time.Duration) generator.CohortSet {
		perSet := scaledCount(createBatch, scale)
		var sets []generator.WorkloadsSet
		for range workloads / createBatch {
			sets = append(sets, generator.WorkloadsSet{Count: perSet, Workloads: []generator.WorkloadTemplate{{
				ClassName: class, RuntimeMs: uint(runtime.Milliseconds()), Priority: 100, Request: "1",
			}}})
		}
		return generator.CohortSet{ClassName: class, Count: 1, QueuesSets: []generator.QueuesSet{{
			ClassName: class, Count: count,
			NominalQuota: fmt.Sprint(scaledCount(quota, scale)), BorrowingLimit: "0",
			ReclaimWithinCohort: kueue.PreemptionPolicyNever, WithinClusterQueue: kueue.PreemptionPolicyNever,
			WorkloadsSets: sets,
		}}}
	}
	flavor := &generator.ResourceFlavorConfig{Name: "rf"}
	setup = &generator.Config{ResourceFlavor: flavor, Cohorts: []generator.CohortSet{
		queues(backgroundClass, backgroundQueues, backgroundWorkloads, backgroundWorkloads, backgroundRuntime),
	}}
	measured = &generator.Config{ResourceFlavor: flavor, Cohorts: []generator.CohortSet{
		queues(deepClass, deepQueues, deepWorkloads, deepQuota, deepRuntime),
	}}
	return setup, measured
}

// Shape of the slow-cycle load at scale 1, after upstream issue 14477, whose cycles were slow
// because the snapshot was large: a topology of slowRacks racks of slowNodesPerRack nodes, the
// background ClusterQueues' slowBackgroundWorkloads each admitted on it before the clock, and the
// deep ClusterQueues' slowDeepWorkloads each held, then released with quota for all of them. Every
// workload asks for one CPU on one node of a rack (required) and runs longer than any run, so each
// cycle snapshots every node and every admitted workload's placement, and the API server writes
// no more than one admission per workload.
const (
	slowRacks               = 40
	slowNodesPerRack        = 100
	slowNodeCPU             = "96"
	slowBackgroundWorkloads = 250
	slowDeepWorkloads       = 1000
	slowRuntime             = 24 * time.Hour

	slowTopology  = "slow-cycle-topology"
	slowFlavor    = "tas-flavor"
	slowRackLabel = "cloud.provider.com/topology-rack"
)

// slowCycleLoad builds the slow-cycle load at scale: workload counts, quotas and racks scale
// together; nodes per rack and runtimes do not.
func slowCycleLoad(scale float64) (setup, measured *generator.Config) {
	queues := func(class string, count, workloads int) generator.CohortSet {
		perSet := scaledCount(createBatch, scale)
		var sets []generator.WorkloadsSet
		for range workloads / createBatch {
			sets = append(sets, generator.WorkloadsSet{Count: perSet, Workloads: []generator.WorkloadTemplate{{
				ClassName: class, RuntimeMs: uint(slowRuntime.Milliseconds()), Priority: 100, Request: "1",
				PodCount: 1, TASConstraint: "required", TASLevel: slowRackLabel,
			}}})
		}
		return generator.CohortSet{ClassName: class, Count: 1, QueuesSets: []generator.QueuesSet{{
			ClassName: class, Count: count,
			NominalQuota: fmt.Sprint(perSet * len(sets)), BorrowingLimit: "0",
			ReclaimWithinCohort: kueue.PreemptionPolicyNever, WithinClusterQueue: kueue.PreemptionPolicyNever,
			WorkloadsSets: sets,
		}}}
	}
	topology := &generator.TopologyConfig{Name: slowTopology, Levels: []generator.TopologyLevel{
		{Name: "block", Count: 1, NodeLabel: "cloud.provider.com/topology-block"},
		{Name: "rack", Count: scaledCount(slowRacks, scale), NodeLabel: slowRackLabel},
		{Name: "node", Count: slowNodesPerRack, NodeLabel: "kubernetes.io/hostname"},
	}}
	topology.Levels[2].Capacity.CPU = slowNodeCPU
	topology.Levels[2].Capacity.Memory = "256Gi"
	flavor := &generator.ResourceFlavorConfig{Name: slowFlavor, NodeLabel: "tas-node-group", TopologyName: slowTopology}
	setup = &generator.Config{Topology: topology, ResourceFlavor: flavor, Cohorts: []generator.CohortSet{
		queues(backgroundClass, backgroundQueues, slowBackgroundWorkloads),
	}}
	measured = &generator.Config{ResourceFlavor: flavor, Cohorts: []generator.CohortSet{
		queues(deepClass, deepQueues, slowDeepWorkloads),
	}}
	return setup, measured
}

// workloadCPU is a template's whole request in CPUs (per pod times pods).
func workloadCPU(w generator.WorkloadTemplate) (float64, error) {
	q, err := resource.ParseQuantity(w.Request)
	if err != nil {
		return 0, fmt.Errorf("workload class %s: request %q: %w", w.ClassName, w.Request, err)
	}
	return q.AsApproximateFloat64() * float64(max(w.PodCount, 1)), nil
}

// capacityBound is the load's work over its quota: for each cohort, the sum over its workloads of
// runtime times request, divided by the sum of its ClusterQueues' nominal quotas; the largest over
// cohorts. No scheduler finishes the load sooner, whatever its speed.
func capacityBound(cfg *generator.Config) (time.Duration, error) {
	var bound float64
	for _, c := range cfg.Cohorts {
		var work, quota float64
		for _, qs := range c.QueuesSets {
			q, err := resource.ParseQuantity(qs.NominalQuota)
			if err != nil {
				return 0, fmt.Errorf("ClusterQueue class %s: nominalQuota %q: %w", qs.ClassName, qs.NominalQuota, err)
			}
			quota += float64(qs.Count) * q.AsApproximateFloat64()
			for _, ws := range qs.WorkloadsSets {
				for _, w := range ws.Workloads {
					cpu, err := workloadCPU(w)
					if err != nil {
						return 0, err
					}
					work += float64(qs.Count*ws.Count) * cpu * float64(w.RuntimeMs) / 1000
				}
			}
		}
		if quota > 0 {
			bound = max(bound, work/quota)
		}
	}
	return time.Duration(bound * float64(time.Second)), nil
}

// quotaWorth is how many of its own workloads the load's quota holds at once: for each
// ClusterQueue, its nominal quota over the mean request of its workloads, summed and rounded down.
func quotaWorth(cfg *generator.Config) (int, error) {
	var worth float64
	for _, c := range cfg.Cohorts {
		for _, qs := range c.QueuesSets {
			q, err := resource.ParseQuantity(qs.NominalQuota)
			if err != nil {
				return 0, fmt.Errorf("ClusterQueue class %s: nominalQuota %q: %w", qs.ClassName, qs.NominalQuota, err)
			}
			var n, cpus float64
			for _, ws := range qs.WorkloadsSets {
				for _, w := range ws.Workloads {
					cpu, err := workloadCPU(w)
					if err != nil {
						return 0, err
					}
					n += float64(ws.Count)
					cpus += float64(ws.Count) * cpu
				}
			}
			if cpus > 0 {
				worth += float64(c.Count*qs.Count) * q.AsApproximateFloat64() * n / cpus
			}
		}
	}
	return int(math.Floor(worth + 1e-9)), nil
}

// deepRate is the admission rate while the queues are deep. The backlog is the load's workloads
// not admitted yet, counting those still to be created (the load is submitted at once); the
// queues are deep until the backlog first drops below the quota's worth, which happens at the
// admission number total-worth+1. The rate is that number over the time from the start to it.
// admitted are the first admissions' times since the start, in any order. ok is false when the
// backlog never was as deep as the quota (total < worth) or the run did not get that far.
func deepRate(admitted []time.Duration, total, worth int) (rate float64, until time.Duration, ok bool) {
	k := total - worth + 1
	if worth < 1 || total < worth || len(admitted) < k {
		return 0, 0, false
	}
	sorted := slices.Clone(admitted)
	slices.Sort(sorted)
	until = sorted[k-1]
	if until <= 0 {
		return 0, 0, false
	}
	return float64(k) / until.Seconds(), until, true
}

// quotaFilled is when the admission number worth came (admitted as in deepRate): how long the
// scheduler took to fill the quota once, which no runtime limits. ok is false if it never came.
func quotaFilled(admitted []time.Duration, worth int) (time.Duration, bool) {
	if worth < 1 || len(admitted) < worth {
		return 0, false
	}
	sorted := slices.Clone(admitted)
	slices.Sort(sorted)
	return sorted[worth-1], true
}

// copyConfig deep-copies a generator configuration.
func copyConfig(cfg *generator.Config) (*generator.Config, error) {
	if cfg == nil {
		return nil, nil
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	out := &generator.Config{}
	return out, json.Unmarshal(raw, out)
}

// deepRateBound is the highest deepRate a scheduler with instant cycles could reach on a load
// whose workloads all run for runtime: the quota admits worth workloads per runtime, so admission
// number k comes runtime×⌊(k-1)/worth⌋ after the start at the earliest. ok is false when that is
// 0 (only creation limits the rate) or deepRate is not defined.
func deepRateBound(total, worth int, runtime time.Duration) (rate float64, ok bool) {
	k := total - worth + 1
	if worth < 1 || total < worth {
		return 0, false
	}
	earliest := runtime * time.Duration((k-1)/worth)
	if earliest <= 0 {
		return 0, false
	}
	return float64(k) / earliest.Seconds(), true
}

// uniformRuntime is the runtime every workload of cfg shares; false when they differ.
func uniformRuntime(cfg *generator.Config) (time.Duration, bool) {
	var runtimes []uint
	for _, c := range cfg.Cohorts {
		for _, qs := range c.QueuesSets {
			for _, ws := range qs.WorkloadsSets {
				for _, w := range ws.Workloads {
					if !slices.Contains(runtimes, w.RuntimeMs) {
						runtimes = append(runtimes, w.RuntimeMs)
					}
				}
			}
		}
	}
	if len(runtimes) != 1 {
		return 0, false
	}
	return time.Duration(runtimes[0]) * time.Millisecond, true
}
