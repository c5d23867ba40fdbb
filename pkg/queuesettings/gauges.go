package queuesettings

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/util/roletracker"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/cohorttree"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/metrics"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// gaugeKey names one series of a gauge without its replica_role; setting is the protected
// workloads' setting or a unit's label.
type gaugeKey struct{ cq, setting string }

// queueCounter is a feature's plugin (policy.Unit.Plugin) with a per-ClusterQueue gauge
// (metrics.UnitGauge): Count is the label under which it counts c, a workload holding quota; ok
// false when it does not count c.
type queueCounter interface {
	Count(c *policy.Candidate) (label string, ok bool)
}

// gauges sets the state gauges (turn holders, seconds to the next turn, protected workloads, and
// the units' counts) from the workloads holding quota, and deletes the series of the previous
// sweep that are gone.
type gauges struct {
	holders, nextTurn, protected map[gaugeKey]float64
	// counted are the features' counts (queueCounter), by feature.
	counted map[policy.Feature]map[gaugeKey]float64
}

// setGauges computes the gauges at now from holding (unfinished workloads holding quota, by
// ClusterQueue).
func (w *Waker) setGauges(ctx context.Context, holding map[kueue.ClusterQueueReference][]*kueue.Workload, now time.Time) {
	g := gauges{holders: map[gaugeKey]float64{}, nextTurn: map[gaugeKey]float64{}, protected: map[gaugeKey]float64{}, counted: map[policy.Feature]map[gaugeKey]float64{}}
	// The turn gauges, of the ClusterQueues that take turns.
	for _, cq := range w.Store.QueuesSetting(timebased.Feature) {
		qs := timebased.SettingsOf(w.Store, cq)
		if !qs.TakesTurns() {
			continue
		}
		var n int
		next := time.Duration(-1)
		for _, wl := range holding[cq] {
			c := policy.CandidateOf(wl, w.RuntimeClock)
			if c.QuotaReservedAt.IsZero() || c.Evicted {
				continue
			}
			n++
			left := max(qs.TurnEnds(&c).Sub(now), 0)
			if next < 0 || left < next {
				next = left
			}
		}
		k := gaugeKey{cq: string(cq)}
		g.holders[k] = float64(n)
		if next >= 0 {
			g.nextTurn[k] = next.Seconds()
		}
	}
	// Facts are read as the waker reads them, so that the gauges count what it acts on; each
	// feature names the settings that protect a running workload.
	units := plugins.Units()
	facts := policy.WakeSettings{Enabled: FeatureEnabled, Units: units}
	sources := w.sources()
	for cq, wls := range holding {
		var parents []kueue.CohortReference
		read := false
		survey := policy.Survey{Now: now, ClusterQueue: cq, Parents: func() []kueue.CohortReference {
			if !read {
				// A read error leaves the path as far as it was read: the gauge shows the nearer settings.
				parents, _ = cohorttree.Read(ctx, w.Client, cq)
				read = true
			}
			return parents
		}}
		for _, wl := range wls {
			c := policy.CandidateOf(wl, w.RuntimeClock)
			facts.ReadFacts(&c, wl, sources)
			for _, u := range units {
				counter, ok := u.Plugin.(queueCounter)
				if !ok || !FeatureEnabled(u.Feature) {
					continue
				}
				if label, ok := counter.Count(&c); ok {
					if g.counted[u.Feature] == nil {
						g.counted[u.Feature] = map[gaugeKey]float64{}
					}
					g.counted[u.Feature][gaugeKey{string(cq), label}]++
				}
			}
			if c.Evicted || !c.Admitted {
				continue
			}
			for _, setting := range units.Protections(&c, survey, sources, FeatureEnabled) {
				g.protected[gaugeKey{string(cq), setting}]++
			}
		}
	}
	role := roletracker.GetRole(w.RoleTracker)
	byQueue := func(k gaugeKey) []string {
		return metrics.ClusterQueueLabels(w.CustomLabels, kueue.ClusterQueueReference(k.cq), k.cq, role)
	}
	setAll(metrics.TurnHolders, g.holders, w.gauges.holders, byQueue)
	setAll(metrics.NextTurnSeconds, g.nextTurn, w.gauges.nextTurn, byQueue)
	setAll(metrics.ProtectedWorkloads, g.protected, w.gauges.protected, func(k gaugeKey) []string {
		return metrics.ClusterQueueLabels(w.CustomLabels, kueue.ClusterQueueReference(k.cq), k.cq, k.setting, role)
	})
	for _, u := range units {
		if vec := metrics.UnitGauge(u.Feature); vec != nil {
			setAll(vec, g.counted[u.Feature], w.gauges.counted[u.Feature], func(k gaugeKey) []string {
				return metrics.ClusterQueueLabels(w.CustomLabels, kueue.ClusterQueueReference(k.cq), k.cq, k.setting, role)
			})
		}
	}
	w.gauges = g
}

// setAll sets every series of cur and deletes those of prev that cur no longer has.
func setAll[K comparable](vec *prometheus.GaugeVec, cur, prev map[K]float64, labels func(K) []string) {
	for k, v := range cur {
		vec.WithLabelValues(labels(k)...).Set(v)
	}
	for k := range prev {
		if _, ok := cur[k]; !ok {
			vec.DeleteLabelValues(labels(k)...)
		}
	}
}
