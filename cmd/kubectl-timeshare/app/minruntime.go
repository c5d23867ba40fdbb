package app

import (
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
)

// What the queues report shows of min-runtimes: each ClusterQueue's resolved settings, and the
// protections of its workloads.

// minRuntimeDefaults names the manager configuration's min-runtime defaults and reclaim method.
func minRuntimeDefaults(m ManagerSettings) string {
	d := minruntime.DefaultsOf(&m.Config)
	return fmt.Sprintf("%s, reclaimResolveMethod %s", d, d.Method)
}

// minRuntimePaths are every ClusterQueue's path up its tree, by name: a reclaim is resolved
// between two of them.
type minRuntimePaths struct {
	paths    map[string]minruntime.Path
	defaults minruntime.Defaults
}

// add reads cq's path, through the Cohorts up (nearest first), off store.
func (mp *minRuntimePaths) add(store *queuesettings.Store, cq string, up []kueue.CohortReference) {
	if mp.paths == nil {
		mp.paths = map[string]minruntime.Path{}
	}
	mp.paths[cq], mp.defaults = minruntime.PathOf(store.SettingsPath(minruntime.Feature, kueue.ClusterQueueReference(cq), up))
}

// parents are the Cohorts above cq, nearest first.
func (mp *minRuntimePaths) parents(cq string) []kueue.CohortReference {
	var out []kueue.CohortReference
	for _, n := range mp.paths[cq][1:] {
		out = append(out, kueue.CohortReference(n.Name))
	}
	return out
}

// protections resolves cq's min-runtimes, against its own queue and against every reclaimer,
// with their rows in the report.
func (mp *minRuntimePaths) protections(cq string, known bool) ([]SettingReport, []protection) {
	preempt := minruntime.ResolvePreempt(mp.paths[cq], mp.defaults)
	rows := []SettingReport{minRuntimeSetting("preemptMinRuntime", preempt, known, nil)}
	out := []protection{{kind: "preempt", p: preempt}}
	for _, rc := range mp.resolveReclaims(cq) {
		rows = append(rows, minRuntimeSetting("reclaimMinRuntime", rc.p, known, rc.against))
		out = append(out, protection{kind: "reclaim", p: rc.p, against: rc.against})
	}
	return rows, out
}

func minRuntimeSetting(name string, p minruntime.Protection, known bool, against []string) SettingReport {
	s := SettingReport{Name: name, Value: p.MinRuntime.String(), Source: sourceOf(p, known), Against: against}
	if p.Source.Default() && !known {
		s.Value = ""
	}
	return s
}

// protection is a resolved min-runtime of a ClusterQueue's workloads, against whom it applies.
type protection struct {
	kind    string
	p       minruntime.Protection
	against []string
}

// resolveReclaims resolves cq's reclaimMinRuntime against every other ClusterQueue of its cohort
// tree (with the LCA method the value may depend on the reclaimer), grouping the reclaimers that
// get the same one. Without any, it is resolved from cq up, as the Queue method does.
func (mp *minRuntimePaths) resolveReclaims(cq string) []protection {
	victim := mp.paths[cq]
	root := victim[len(victim)-1]
	var out []protection
	for _, other := range slices.Sorted(maps.Keys(mp.paths)) {
		p := mp.paths[other]
		if other == cq || len(victim) == 1 || p[len(p)-1] != root {
			continue
		}
		res := minruntime.ResolveReclaim(mp.defaults.Method, p, victim, mp.defaults)
		if i := slices.IndexFunc(out, func(x protection) bool { return x.p == res }); i >= 0 {
			out[i].against = append(out[i].against, other)
		} else {
			out = append(out, protection{kind: "reclaim", p: res, against: []string{other}})
		}
	}
	if len(out) == 0 {
		out = append(out, protection{kind: "reclaim", p: minruntime.ResolveReclaim(minruntime.ResolveQueue, nil, victim, mp.defaults)})
	}
	return out
}

// sourceOf says where a resolved value comes from, in the words of its resolution.
func sourceOf(p minruntime.Protection, known bool) string {
	if p.Source.Default() {
		if !known {
			return unknownDefault
		}
		return "manager default"
	}
	return p.Source.Where()
}

// protectionRows are the min-runtimes among protections that protect c, or did.
func protectionRows(c *policy.Candidate, protections []protection, known bool, now time.Time) []Protection {
	var out []Protection
	for _, x := range protections {
		p := x.p
		if p.MinRuntime <= 0 || (p.Source.Default() && !known) {
			continue
		}
		pr := Protection{Kind: x.kind, Active: minruntime.Protected(c, p, now), Source: p.Source.String(), Against: x.against}
		if end := minruntime.ProtectionEnds(c, p); !end.IsZero() {
			pr.Until = ptrTime(metav1.NewTime(end))
		}
		out = append(out, pr)
	}
	return out
}
