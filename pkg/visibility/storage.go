package visibility

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityapi "sigs.k8s.io/kueue/apis/visibility/v1beta2"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/util/priority"
	utilqueue "sigs.k8s.io/kueue/pkg/util/queue"
	upstreamstorage "sigs.k8s.io/kueue/pkg/visibility/storage"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
)

// Pending is what the API reads: a ClusterQueue's pending workloads in the order they will be
// tried, and the ClusterQueue a LocalQueue feeds.
type Pending interface {
	PendingWorkloadsInfo(kueue.ClusterQueueReference) []*workload.Info
	ClusterQueueFromLocalQueue(utilqueue.LocalQueueReference) (kueue.ClusterQueueReference, bool)
}

// Estimates gives the admission estimates of a ClusterQueue's pending workloads, by
// "namespace/name"; a workload it has none for is shown without.
type Estimates interface {
	Estimates(kueue.ClusterQueueReference) map[string]estimate.Estimate
}

// Storage returns the resources of the API group: ClusterQueues and LocalQueues exist only to
// carry their pendingworkloads subresources, which read pending and, unless nil, estimates.
func Storage(pending Pending, estimates Estimates) map[string]rest.Storage {
	return map[string]rest.Storage{
		"clusterqueues":                  upstreamstorage.NewCqREST(),
		"clusterqueues/pendingworkloads": &clusterQueuePending{pending: pending, estimates: estimates},
		"localqueues":                    upstreamstorage.NewLqREST(),
		"localqueues/pendingworkloads":   &localQueuePending{pending: pending, estimates: estimates},
	}
}

type clusterQueuePending struct {
	pending   Pending
	estimates Estimates
}

type localQueuePending struct {
	pending   Pending
	estimates Estimates
}

var (
	_ rest.GetterWithOptions = &clusterQueuePending{}
	_ rest.Scoper            = &clusterQueuePending{}
	_ rest.GetterWithOptions = &localQueuePending{}
	_ rest.Scoper            = &localQueuePending{}
)

func (*clusterQueuePending) New() runtime.Object                           { return &visibilityapi.PendingWorkloadsSummary{} }
func (*clusterQueuePending) Destroy()                                      {}
func (*clusterQueuePending) NamespaceScoped() bool                         { return false }
func (*clusterQueuePending) NewGetOptions() (runtime.Object, bool, string) { return newOptions() }

func (*localQueuePending) New() runtime.Object                           { return &visibilityapi.PendingWorkloadsSummary{} }
func (*localQueuePending) Destroy()                                      {}
func (*localQueuePending) NamespaceScoped() bool                         { return true }
func (*localQueuePending) NewGetOptions() (runtime.Object, bool, string) { return newOptions() }

// newOptions carries the default limit: defaulting functions do not run for a request without
// query parameters.
func newOptions() (runtime.Object, bool, string) {
	return &visibilityapi.PendingWorkloadOptions{Limit: constants.DefaultPendingWorkloadsLimit}, false, ""
}

// window is the part of a list a request asks for: offset and limit, clamped to what the API allows.
func window(opts runtime.Object) (offset, limit int, err error) {
	o, ok := opts.(*visibilityapi.PendingWorkloadOptions)
	if !ok {
		return 0, 0, fmt.Errorf("unexpected options %T", opts)
	}
	return int(max(o.Offset, 0)), int(min(max(o.Limit, 0), constants.MaxPendingWorkloadsLimit)), nil
}

// Get lists a ClusterQueue's pending workloads with their positions in it and in their LocalQueues.
func (s *clusterQueuePending) Get(_ context.Context, name string, opts runtime.Object) (runtime.Object, error) {
	offset, limit, err := window(opts)
	if err != nil {
		return nil, err
	}
	pending := s.pending.PendingWorkloadsInfo(kueue.ClusterQueueReference(name))
	if pending == nil {
		return nil, errors.NewNotFound(visibilityapi.Resource("clusterqueue"), name)
	}
	// A LocalQueue position counts every workload of that LocalQueue ahead, also those before offset.
	inLocalQueue := map[utilqueue.LocalQueueReference]int32{}
	items := make([]visibilityapi.PendingWorkload, 0, min(limit, max(len(pending)-offset, 0)))
	for i := 0; i < len(pending) && i < offset+limit; i++ {
		lq := utilqueue.KeyFromWorkload(pending[i].Obj)
		if i >= offset {
			items = append(items, item(pending[i], i, inLocalQueue[lq]))
		}
		inLocalQueue[lq]++
	}
	annotate(items, s.estimates, kueue.ClusterQueueReference(name), "")
	return &visibilityapi.PendingWorkloadsSummary{Items: items}, nil
}

// Get lists a LocalQueue's pending workloads with their positions in it and in its ClusterQueue.
func (s *localQueuePending) Get(ctx context.Context, name string, opts runtime.Object) (runtime.Object, error) {
	offset, limit, err := window(opts)
	if err != nil {
		return nil, err
	}
	ns := genericapirequest.NamespaceValue(ctx)
	lq := utilqueue.NewLocalQueueReference(ns, kueue.LocalQueueName(name))
	cq, ok := s.pending.ClusterQueueFromLocalQueue(lq)
	if !ok {
		return nil, errors.NewNotFound(visibilityapi.Resource("localqueue"), name)
	}
	pending := s.pending.PendingWorkloadsInfo(cq)
	items := make([]visibilityapi.PendingWorkload, 0, min(limit, len(pending)))
	seen := 0
	for i := 0; i < len(pending) && len(items) < limit; i++ {
		if utilqueue.KeyFromWorkload(pending[i].Obj) != lq {
			continue
		}
		if seen >= offset {
			items = append(items, item(pending[i], i, int32(seen)))
		}
		seen++
	}
	annotate(items, s.estimates, cq, ns)
	return &visibilityapi.PendingWorkloadsSummary{Items: items}, nil
}

// item is one workload as the API shows it.
func item(info *workload.Info, inClusterQueue int, inLocalQueue int32) visibilityapi.PendingWorkload {
	wl := info.Obj
	var owners []metav1.OwnerReference
	for _, o := range wl.OwnerReferences {
		owners = append(owners, metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID})
	}
	return visibilityapi.PendingWorkload{
		ObjectMeta: metav1.ObjectMeta{
			Name:              wl.Name,
			Namespace:         wl.Namespace,
			OwnerReferences:   owners,
			CreationTimestamp: wl.CreationTimestamp,
		},
		Priority:               priority.Priority(wl),
		LocalQueueName:         wl.Spec.QueueName,
		PositionInClusterQueue: int32(inClusterQueue),
		PositionInLocalQueue:   inLocalQueue,
	}
}

// annotate carries each item's estimate in its annotations: upstream's PendingWorkload has no
// field for it. It asks only when there is something to show. For a LocalQueue's reader (reader,
// the namespace; "" for the ClusterQueue's, the admin) the workloads of other namespaces that an
// estimate names are not named (message.ForNamespace).
func annotate(items []visibilityapi.PendingWorkload, estimates Estimates, cq kueue.ClusterQueueReference, reader string) {
	if estimates == nil || len(items) == 0 {
		return
	}
	byName := estimates.Estimates(cq)
	for i := range items {
		e, ok := byName[items[i].Namespace+"/"+items[i].Name]
		if !ok {
			continue
		}
		when, why := annotations.EstimateUnknown, e.Reason
		if !e.Unknown {
			when, why = e.When.UTC().Format(time.RFC3339), e.Sentence
		}
		if reader != "" {
			why = message.ForNamespace(why, reader)
		}
		items[i].Annotations = map[string]string{annotations.EstimatedAdmission: when, annotations.AdmissionEstimate: why}
	}
}
