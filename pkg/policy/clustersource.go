package policy

import (
	"context"
	"fmt"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
)

// ClusterSource is a unit's source of facts that reads the cluster's objects itself
// (Unit.NewSource): built empty, loaded before the first scheduling cycle, and kept current by
// the controllers it adds to the manager. Whoever needs the facts (the manager, the simulator)
// builds the sources from the table, not from the features.
type ClusterSource interface {
	// Load reads every object the source keeps facts of, once.
	Load(ctx context.Context, r client.Reader) error
	// Setup adds to mgr the controllers that keep the source current.
	Setup(mgr ctrl.Manager) error
}

// NewSources builds the cluster sources of t's units; live, when not nil, is where a source reads
// an object it has not seen yet (the manager's cache).
func (t Table) NewSources(live client.Reader) Sources {
	var out Sources
	for _, u := range t {
		if u.NewSource != nil {
			out = append(out, u.NewSource(live))
		}
	}
	return out
}

// LoadSources loads each cluster source of src from r.
func LoadSources(ctx context.Context, src Sources, r client.Reader) error {
	for _, s := range src {
		if cs, ok := s.(ClusterSource); ok {
			if err := cs.Load(ctx, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetupSources adds to mgr the controllers of each cluster source of src.
func SetupSources(mgr ctrl.Manager, src Sources) error {
	for _, s := range src {
		if cs, ok := s.(ClusterSource); ok {
			if err := cs.Setup(mgr); err != nil {
				return err
			}
		}
	}
	return nil
}

// Env is what the manager gives the units' controllers (Unit.Setup).
type Env struct {
	Clock clock.Clock
	// Wake re-evaluates a ClusterQueue's pending workloads.
	Wake func(context.Context, kueue.ClusterQueueReference)
	// CustomLabels are the manager's ClusterQueue custom metric labels; RoleTracker its replica
	// role.
	CustomLabels *kueuemetrics.CustomLabels
	RoleTracker  *roletracker.RoleTracker
}

// SetupControllers adds the controllers of t's units to mgr (Unit.Setup), in the table's order.
func (t Table) SetupControllers(mgr ctrl.Manager, env Env) error {
	for _, u := range t {
		if u.Setup == nil {
			continue
		}
		if err := u.Setup(mgr, env); err != nil {
			return fmt.Errorf("setting up the controllers of %s: %w", u.Feature, err)
		}
	}
	return nil
}
