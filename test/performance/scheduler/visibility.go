package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/generator"
)

// The visibility probe (-visibility-probe N) is a ClusterQueue of its own class, created after the
// setup and left out of every figure, whose quota holds one workload while N more wait behind it
// for the whole run. While the measured part plays, the probe reads its ClusterQueue's and its
// LocalQueue's pending workloads from the manager's visibility API every probeInterval: what an
// admin's or a user's `kubectl get --raw .../pendingworkloads` costs on a loaded manager, with the
// admission estimates' refresh at its configured interval.
const (
	probeClass    = "visibility-probe"
	probeInterval = time.Second
	probeRuntime  = 24 * time.Hour
)

// probeLoad is the probe's generator configuration: one ClusterQueue of quota 1, pending+1
// one-CPU workloads. Its flavor is its own, so that it never shares quota with the load's.
func probeLoad(pending int) *generator.Config {
	var sets []generator.WorkloadsSet
	for left := pending + 1; left > 0; left -= createBatch {
		sets = append(sets, generator.WorkloadsSet{Count: min(left, createBatch), Workloads: []generator.WorkloadTemplate{{
			ClassName: probeClass, RuntimeMs: uint(probeRuntime.Milliseconds()), Priority: 100, Request: "1",
		}}})
	}
	return &generator.Config{ResourceFlavor: &generator.ResourceFlavorConfig{Name: probeClass}, Cohorts: []generator.CohortSet{{
		ClassName: probeClass, Count: 1, QueuesSets: []generator.QueuesSet{{
			ClassName: probeClass, Count: 1, NominalQuota: "1", BorrowingLimit: "0",
			ReclaimWithinCohort: kueue.PreemptionPolicyNever, WithinClusterQueue: kueue.PreemptionPolicyNever,
			WorkloadsSets: sets,
		}},
	}}}
}

// probeSamples are the latencies of the probe's reads, by endpoint, and the fewest pending
// workloads one answer listed.
type probeSamples struct {
	ClusterQueue, LocalQueue []time.Duration
	// Errors counts reads that failed.
	Errors int
	// FewestListed is the smallest number of pending workloads an answer listed (-1 before any).
	FewestListed int
}

// percentile is the p-th percentile (0..1) of ds by the nearest rank; 0 when empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// visibilityProbe reads the probe's queues through the visibility API until ctx ends.
type visibilityProbe struct {
	api       visibilityclient.Interface
	cq, lq    string
	namespace string

	mu      sync.Mutex
	samples probeSamples
}

// newVisibilityProbe finds the probe's ClusterQueue and LocalQueue (the generator names them) and
// a client of the visibility API at cfg.
func newVisibilityProbe(ctx context.Context, c client.Reader, cfg *rest.Config) (*visibilityProbe, error) {
	var cqs kueue.ClusterQueueList
	if err := c.List(ctx, &cqs, client.MatchingLabels{generator.ClassLabel: probeClass}); err != nil {
		return nil, err
	}
	if len(cqs.Items) != 1 {
		return nil, fmt.Errorf("visibility probe: %d ClusterQueues of class %s, want 1", len(cqs.Items), probeClass)
	}
	api, err := visibilityclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The generator names a ClusterQueue's namespace and LocalQueue after it.
	name := cqs.Items[0].Name
	return &visibilityProbe{api: api, cq: name, lq: name, namespace: name, samples: probeSamples{FewestListed: -1}}, nil
}

// run reads both endpoints every probeInterval until ctx ends.
func (p *visibilityProbe) run(ctx context.Context) {
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	for {
		p.read(ctx, func(ctx context.Context) (int, error) {
			s, err := p.api.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, p.cq, metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			return len(s.Items), nil
		}, &p.samples.ClusterQueue)
		p.read(ctx, func(ctx context.Context) (int, error) {
			s, err := p.api.VisibilityV1beta2().LocalQueues(p.namespace).GetPendingWorkloadsSummary(ctx, p.lq, metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			return len(s.Items), nil
		}, &p.samples.LocalQueue)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *visibilityProbe) read(ctx context.Context, get func(context.Context) (int, error), into *[]time.Duration) {
	start := time.Now()
	n, err := get(ctx)
	took := time.Since(start)
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.samples.Errors++
		return
	}
	*into = append(*into, took)
	if p.samples.FewestListed < 0 || n < p.samples.FewestListed {
		p.samples.FewestListed = n
	}
}

// result returns what the probe measured so far.
func (p *visibilityProbe) result() probeSamples {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.samples
	out.ClusterQueue, out.LocalQueue = slices.Clone(out.ClusterQueue), slices.Clone(out.LocalQueue)
	return out
}
