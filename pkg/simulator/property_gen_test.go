package simulator

import (
	"fmt"
	"math/rand"
	"strings"
	"time"
)

// genModel is a generated scenario, kept as a model so that it can be shrunk and written out in
// the simulator's scenario format.
type genModel struct {
	Seed           int64
	Until          time.Duration
	Interval       time.Duration
	FairSharing    bool
	DefaultPreempt time.Duration
	DefaultReclaim time.Duration
	ResolveQueue   bool
	// Budget, when set, is the manager's preemptionBudget for every ClusterQueue.
	Budget  *genBudget
	Flavors []string
	Cohorts []genCohort
	CQs     []genCQ
	Classes []genClass
	WLs     []genWL
}

type genCohort struct{ Name, Parent string }

type genBudget struct {
	Max    int
	Period time.Duration
}

type genQuota struct {
	Flavor             string
	Nominal            int
	Borrow, Lend       int
	HasBorrow, HasLend bool
}

type genCQ struct {
	Name, Cohort string
	Strict       bool
	Quota        []genQuota
	Within       string
	Reclaim      string
	Window       time.Duration
	// PreemptMin and ReclaimMin are set when their Has flags are.
	PreemptMin, ReclaimMin       time.Duration
	HasPreemptMin, HasReclaimMin bool
}

type genClass struct {
	Name  string
	Value int32
	// Toleration: MinPreemptable (0: the default, value+1) and TolSeconds (0: none, <0: forever).
	Toleration     bool
	MinPreemptable int32
	TolSeconds     int64
}

type genWL struct {
	Name         string
	CQ           string
	Class        string
	CPU          int
	Arrival      time.Duration
	Duration     time.Duration
	Checkpointed bool
	Expected     time.Duration
}

// generate draws a scenario: one to three ClusterQueues, alone or in a cohort (sometimes two
// levels deep) with borrowing and lending limits, one or two flavors, both queueing strategies,
// priority classes with and without tolerations, min-runtimes and manager defaults, and
// workloads of mixed sizes, priorities, arrivals and durations, some too big to ever fit.
func generate(seed int64) *genModel {
	rng := rand.New(rand.NewSource(seed))
	pick := func(p float64) bool { return rng.Float64() < p }
	minutes := func(choices ...int) time.Duration {
		return time.Duration(choices[rng.Intn(len(choices))]) * time.Minute
	}
	m := &genModel{Seed: seed, Until: 8 * time.Hour, Interval: time.Second}
	m.Flavors = []string{"f0"}
	if pick(0.3) {
		m.Flavors = append(m.Flavors, "f1")
	}
	cohort := ""
	if pick(0.55) {
		cohort = "co"
		if pick(0.25) {
			m.Cohorts = append(m.Cohorts, genCohort{Name: "co", Parent: "root"})
		}
		m.FairSharing = pick(0.15)
	}
	if pick(0.15) {
		m.DefaultPreempt = minutes(5, 20)
	}
	if cohort != "" && pick(0.15) {
		m.DefaultReclaim = minutes(5, 20)
	}
	m.ResolveQueue = pick(0.3)

	nCQ := 1 + rng.Intn(3)
	for i := range nCQ {
		cq := genCQ{Name: fmt.Sprintf("cq%d", i), Strict: pick(0.3)}
		if cohort != "" {
			cq.Cohort = cohort
			if len(m.Cohorts) > 0 && pick(0.3) {
				cq.Cohort = "root"
			}
		}
		for _, f := range m.Flavors {
			q := genQuota{Flavor: f, Nominal: 1 + rng.Intn(6)}
			if cq.Cohort != "" {
				if pick(0.35) {
					q.HasBorrow, q.Borrow = true, rng.Intn(4)
				}
				if pick(0.35) {
					q.HasLend, q.Lend = true, rng.Intn(q.Nominal+1)
				}
			}
			cq.Quota = append(cq.Quota, q)
		}
		switch r := rng.Float64(); {
		case r < 0.7:
			cq.Within = "LowerOrNewerEqualPriority"
			if pick(0.75) {
				cq.Window = minutes(10, 30, 60, 90)
			}
		case r < 0.85:
			cq.Within = "LowerPriority"
		default:
			cq.Within = "Never"
		}
		if cq.Cohort != "" {
			cq.Reclaim = []string{"Any", "LowerPriority", "Never"}[rng.Intn(3)]
		}
		if pick(0.3) {
			cq.HasPreemptMin, cq.PreemptMin = true, minutes(0, 5, 20, 45)
		}
		if cq.Cohort != "" && pick(0.3) {
			cq.HasReclaimMin, cq.ReclaimMin = true, minutes(0, 5, 20, 45)
		}
		m.CQs = append(m.CQs, cq)
	}

	nClasses := 1 + rng.Intn(3)
	for i := range nClasses {
		c := genClass{Name: fmt.Sprintf("p%d", i), Value: int32(10 * i)}
		if pick(0.25) {
			c.Toleration = true
			if pick(0.5) {
				c.MinPreemptable = c.Value + 1 + int32(10*rng.Intn(2))
			}
			switch r := rng.Float64(); {
			case r < 0.1:
				c.TolSeconds = -1
			default:
				c.TolSeconds = int64(minutes(5, 15, 30).Seconds())
			}
		}
		m.Classes = append(m.Classes, c)
	}

	nWL := 3 + rng.Intn(10)
	for i := range nWL {
		cq := m.CQs[rng.Intn(len(m.CQs))]
		most := 0
		for _, q := range cq.Quota {
			most = max(most, q.Nominal)
		}
		w := genWL{
			Name:         fmt.Sprintf("w%d", i),
			CQ:           cq.Name,
			CPU:          1 + rng.Intn(most),
			Arrival:      time.Duration(rng.Intn(180)) * time.Minute,
			Duration:     minutes(10, 30, 60, 120, 240),
			Checkpointed: pick(0.5),
		}
		if pick(0.8) {
			w.Class = m.Classes[rng.Intn(len(m.Classes))].Name
		}
		if pick(0.08) {
			// More than the ClusterQueue and its cohort can ever give.
			w.CPU = 30
		}
		if pick(0.12) {
			w.Expected = minutes(20, 45, 90)
		}
		m.WLs = append(m.WLs, w)
	}
	return m
}

// YAML writes the model in the simulator's scenario format.
func (m *genModel) YAML() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Generated by the rotation property checker, seed %d.", m.Seed)
	object := func(kind, name string) {
		p("apiVersion: kueue.x-k8s.io/v1beta2\nkind: %s\nmetadata: {name: %s}", kind, name)
	}
	for _, f := range m.Flavors {
		object("ResourceFlavor", f)
		p("---")
	}
	for _, c := range m.Cohorts {
		object("Cohort", c.Name)
		if c.Parent != "" {
			p("spec: {parentName: %s}", c.Parent)
		}
		p("---")
	}
	for _, cq := range m.CQs {
		object("ClusterQueue", cq.Name)
		p("spec:")
		if cq.Cohort != "" {
			p("  cohortName: %s", cq.Cohort)
		}
		if cq.Strict {
			p("  queueingStrategy: StrictFIFO")
		}
		var flavors []string
		for _, q := range cq.Quota {
			limits := fmt.Sprintf("nominalQuota: %d", q.Nominal)
			if q.HasBorrow {
				limits += fmt.Sprintf(", borrowingLimit: %d", q.Borrow)
			}
			if q.HasLend {
				limits += fmt.Sprintf(", lendingLimit: %d", q.Lend)
			}
			flavors = append(flavors, fmt.Sprintf("{name: %s, resources: [{name: cpu, %s}]}", q.Flavor, limits))
		}
		p("  resourceGroups: [{coveredResources: [cpu], flavors: [%s]}]", strings.Join(flavors, ", "))
		p("  preemption:")
		p("    withinClusterQueue: %s", cq.Within)
		if cq.Reclaim != "" {
			p("    reclaimWithinCohort: %s", cq.Reclaim)
		}
		if cq.Window > 0 {
			p("    withinClusterQueueConfig: {minAdmitDuration: %s}", cq.Window)
		}
		if cq.HasPreemptMin {
			p("    preemptMinRuntime: %s", cq.PreemptMin)
		}
		if cq.HasReclaimMin {
			p("    reclaimMinRuntime: %s", cq.ReclaimMin)
		}
		p("---")
	}
	for _, c := range m.Classes {
		p("apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata:\n  name: %s", c.Name)
		if c.Toleration {
			p("  annotations:")
			if c.MinPreemptable != 0 {
				p("    preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority: \"%d\"", c.MinPreemptable)
			}
			p("    preemption-toleration.scheduling.x-k8s.io/toleration-seconds: \"%d\"", c.TolSeconds)
		}
		p("value: %d", c.Value)
		p("---")
	}
	p("name: generated-%d", m.Seed)
	p("simulation:")
	p("  until: %s", m.Until)
	p("  schedulingInterval: %s", m.Interval)
	if m.FairSharing {
		p("fairSharing: {}")
	}
	if m.Budget != nil {
		p("featureGates:")
		p("  PreemptionBudget: true")
	}
	if m.DefaultPreempt > 0 || m.DefaultReclaim > 0 || m.ResolveQueue || m.Budget != nil {
		p("timeshare:")
		if m.Budget != nil {
			p("  preemptionBudget: {maxPreemptions: %d, period: %s}", m.Budget.Max, m.Budget.Period)
		}
		if m.DefaultPreempt > 0 {
			p("  defaultPreemptMinRuntime: %s", m.DefaultPreempt)
		}
		if m.DefaultReclaim > 0 {
			p("  defaultReclaimMinRuntime: %s", m.DefaultReclaim)
		}
		if m.ResolveQueue {
			p("  reclaimResolveMethod: Queue")
		}
	}
	p("workloads:")
	for _, w := range m.WLs {
		p("  - name: %s", w.Name)
		p("    clusterQueue: %s", w.CQ)
		if w.Class != "" {
			p("    priorityClass: %s", w.Class)
		}
		p("    arrival: %s", w.Arrival)
		p("    resources: {cpu: %d}", w.CPU)
		p("    duration: %s", w.Duration)
		if w.Checkpointed {
			p("    checkpointed: true")
		}
		if w.Expected > 0 {
			p("    annotations:")
			p("      kueue-timeshare.io/expected-runtime: %s", w.Expected)
			// No cooldown: a workload requeued for its expected runtime is admissible at once.
			p("      kueue-timeshare.io/requeue-delay: 0s")
		}
	}
	return b.String()
}

// shrinkSteps returns smaller variants of m, the most drastic first: without one workload, without
// a ClusterQueue nobody uses, without a feature setting.
func (m *genModel) shrinkSteps() []*genModel {
	var out []*genModel
	clone := func() *genModel {
		c := *m
		c.Cohorts = append([]genCohort(nil), m.Cohorts...)
		c.CQs = append([]genCQ(nil), m.CQs...)
		for i := range c.CQs {
			c.CQs[i].Quota = append([]genQuota(nil), m.CQs[i].Quota...)
		}
		c.Classes = append([]genClass(nil), m.Classes...)
		c.WLs = append([]genWL(nil), m.WLs...)
		return &c
	}
	for i := range m.WLs {
		c := clone()
		c.WLs = append(c.WLs[:i], c.WLs[i+1:]...)
		if len(c.WLs) > 0 {
			out = append(out, c)
		}
	}
	used := map[string]bool{}
	for _, w := range m.WLs {
		used[w.CQ] = true
	}
	for i, cq := range m.CQs {
		if !used[cq.Name] && len(m.CQs) > 1 {
			c := clone()
			c.CQs = append(c.CQs[:i], c.CQs[i+1:]...)
			out = append(out, c)
		}
	}
	if m.FairSharing {
		c := clone()
		c.FairSharing = false
		out = append(out, c)
	}
	if m.DefaultPreempt > 0 || m.DefaultReclaim > 0 || m.ResolveQueue {
		c := clone()
		c.DefaultPreempt, c.DefaultReclaim, c.ResolveQueue = 0, 0, false
		out = append(out, c)
	}
	if len(m.Flavors) > 1 {
		c := clone()
		c.Flavors = c.Flavors[:1]
		for i := range c.CQs {
			c.CQs[i].Quota = c.CQs[i].Quota[:1]
		}
		out = append(out, c)
	}
	for i, cq := range m.CQs {
		if cq.HasPreemptMin || cq.HasReclaimMin {
			c := clone()
			c.CQs[i].HasPreemptMin, c.CQs[i].HasReclaimMin = false, false
			out = append(out, c)
		}
		for j, q := range cq.Quota {
			if q.HasBorrow || q.HasLend {
				c := clone()
				c.CQs[i].Quota[j].HasBorrow, c.CQs[i].Quota[j].HasLend = false, false
				out = append(out, c)
			}
		}
	}
	for i, cl := range m.Classes {
		if cl.Toleration {
			c := clone()
			c.Classes[i].Toleration = false
			out = append(out, c)
		}
	}
	for i, w := range m.WLs {
		if w.Expected > 0 {
			c := clone()
			c.WLs[i].Expected = 0
			out = append(out, c)
		}
		if w.Checkpointed {
			c := clone()
			c.WLs[i].Checkpointed = false
			out = append(out, c)
		}
		if w.Arrival > 0 {
			c := clone()
			c.WLs[i].Arrival = 0
			out = append(out, c)
		}
	}
	return out
}
