package simulator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadfinish "sigs.k8s.io/kueue/pkg/workload/finish"
)

var (
	updateHeadsGolden = flag.Bool("update-heads-golden", false, "rewrite testdata/heads-per-cycle-one.golden from the current loop")
	headsCases        = flag.Int("heads-cases", 40, "generated scenarios TestHeadsPerCycleProperties runs")
)

const headsGolden = "testdata/heads-per-cycle-one.golden"

// headsGoldenSeeds are the generated scenarios whose runs the golden file holds.
const headsGoldenSeeds = 40

// TestHeadsPerCycleOneIsUpstreamsLoop: at a budget of one head per ClusterQueue per cycle, the
// loop makes the decisions it made before the budget existed. The golden file holds, for each
// generated scenario, the digest of its run's events (every field, in order) and its cycle count,
// recorded on the loop before the change.
func TestHeadsPerCycleOneIsUpstreamsLoop(t *testing.T) {
	var got []string
	for seed := int64(1); seed <= headsGoldenSeeds; seed++ {
		sc, err := Parse(fmt.Sprintf("generated-%d.yaml", seed), []byte(generate(seed).YAML()))
		if err != nil {
			t.Fatal(err)
		}
		sc.Timeshare.HeadsPerCycle = ptr.To[int32](1)
		res, err := Run(context.Background(), sc, Options{})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		got = append(got, fmt.Sprintf("%d %s %d %d", seed, eventsDigest(res.Events), len(res.Events), res.Cycles))
	}
	if *updateHeadsGolden {
		if err := os.WriteFile(headsGolden, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(headsGolden)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runs at headsPerCycle 1 (seed, events digest, events, cycles) differ from the loop before it (-want +got):\n%s", diff)
	}
}

// eventsDigest is a short digest of every event, every field, in order.
func eventsDigest(events []Event) string {
	h := sha256.New()
	for _, e := range events {
		fmt.Fprintf(h, "%+v\n", e)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// TestHeadsPerCycleProperties runs generated scenarios at a budget of 32 heads per ClusterQueue
// per cycle: the rotation property checker passes (with its quota and limit check at every
// instant), and StrictFIFO never admits a workload while one ahead of it waits.
func TestHeadsPerCycleProperties(t *testing.T) {
	cases := *headsCases
	if raceDetector && !flagSet("heads-cases") {
		cases = 8
	}
	for seed := int64(1); seed <= int64(cases); seed++ {
		m := generate(seed)
		sc, err := Parse(fmt.Sprintf("generated-%d.yaml", seed), []byte(m.YAML()))
		if err != nil {
			t.Fatal(err)
		}
		sc.Timeshare.HeadsPerCycle = ptr.To[int32](32)
		c := newChecker(sc)
		res, err := Run(context.Background(), sc, Options{observe: c.observe})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		c.verify(res)
		problems := append(c.problems, strictFIFOOrder(sc, res)...)
		for _, n := range res.Notes {
			if strings.Contains(n, "did not settle") {
				problems = append(problems, n)
			}
		}
		if len(problems) > 0 {
			t.Errorf("seed %d at headsPerCycle 32: %d problems, first: %s\n%s", seed, len(problems), problems[0], m.YAML())
		}
	}
}

// strictFIFOOrder checks that in a StrictFIFO ClusterQueue without turns (no minAdmitDuration)
// no workload is admitted while one ahead of it in queue order (priority, then arrival) that
// had arrived is still pending after the same instant.
func strictFIFOOrder(sc *Scenario, res *Result) []string {
	specs := map[string]WorkloadSpec{}
	for _, s := range sc.WorkloadSpecs() {
		specs[s.Name] = s
	}
	pendingAfter := func(name string, at time.Duration) bool {
		for _, r := range res.Workloads {
			if r.Name != name {
				continue
			}
			for _, iv := range r.Intervals {
				if !iv.Running && iv.From <= at && iv.To > at {
					return true
				}
			}
		}
		return false
	}
	var problems []string
	for _, e := range res.Events {
		if e.Kind != EventAdmitted {
			continue
		}
		cq := sc.queueView(e.ClusterQueue)
		if cq == nil || cq.Spec.QueueingStrategy != string(kueue.StrictFIFO) || cq.Spec.Preemption.WithinClusterQueueConfig.MinAdmitDuration != nil {
			continue
		}
		x := specs[e.Workload]
		for name, y := range specs {
			ahead := y.Priority > x.Priority || (y.Priority == x.Priority && y.Arrival < x.Arrival)
			if name == e.Workload || y.ClusterQueue != x.ClusterQueue || !ahead || !pendingAfter(name, e.At) {
				continue
			}
			problems = append(problems, fmt.Sprintf("strict FIFO: %s admitted in %s at +%s while %s, ahead of it, stayed pending", e.Workload, e.ClusterQueue, FormatOffset(e.At), name))
		}
	}
	return problems
}

// usageOf is the quota the workloads hold in the API: per ClusterQueue, flavor and resource, in
// milli-units.
type usageOf map[string]map[kueue.ResourceFlavorReference]map[corev1.ResourceName]int64

func (u usageOf) add(cq string, f kueue.ResourceFlavorReference, r corev1.ResourceName, v int64) {
	if u[cq] == nil {
		u[cq] = map[kueue.ResourceFlavorReference]map[corev1.ResourceName]int64{}
	}
	if u[cq][f] == nil {
		u[cq][f] = map[corev1.ResourceName]int64{}
	}
	u[cq][f][r] += v
}

// checkLimits checks, at an instant, that the quota reserved in the API keeps within every
// ClusterQueue's nominal quota and borrowing limit and every lender's lending limit.
func (c *checker) checkLimits(now time.Duration, w *world) {
	usage := usageOf{}
	for _, wl := range w.seen {
		if !workload.HasQuotaReservation(wl) || workloadfinish.IsFinished(wl) || wl.Status.Admission == nil {
			continue
		}
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			for r, f := range psa.Flavors {
				if q, ok := psa.ResourceUsage[r]; ok {
					usage.add(string(wl.Status.Admission.ClusterQueue), f, r, q.MilliValue())
				}
			}
		}
	}
	for _, p := range limitProblems(c.sc, usage) {
		c.failf("limits at +%s: %s", FormatOffset(now), p)
	}
}

// limitProblems compares usage with the scenario's quotas. A ClusterQueue without a cohort uses
// at most its nominal quota; one in a cohort at most nominal plus borrowing limit; and in each
// cohort tree, what the ClusterQueues use beyond what they keep for themselves (nominal minus
// lending limit) is at most what they lend, plus the Cohorts' own quota.
func limitProblems(sc *Scenario, usage usageOf) []string {
	type fr struct {
		f kueue.ResourceFlavorReference
		r corev1.ResourceName
	}
	milli := func(q *resource.Quantity) int64 {
		if q == nil {
			return -1
		}
		return q.MilliValue()
	}
	var problems []string
	// pool and drawn are per cohort tree: what may be lent, and what is borrowed.
	pool := map[string]map[fr]int64{}
	drawn := map[string]map[fr]int64{}
	for _, u := range sc.ClusterQueues {
		cq := sc.queueView(u.GetName())
		root := sc.cohortRoot(cq.Name)
		if pool[root] == nil {
			pool[root], drawn[root] = map[fr]int64{}, map[fr]int64{}
		}
		for _, g := range cq.Spec.ResourceGroups {
			for _, f := range g.Flavors {
				for _, rq := range f.Resources {
					nominal, used := rq.NominalQuota.MilliValue(), usage[cq.Name][f.Name][rq.Name]
					bl, ll := milli(rq.BorrowingLimit), milli(rq.LendingLimit)
					switch {
					case root == "" && used > nominal:
						problems = append(problems, fmt.Sprintf("%s uses %dm of %s in %s, over its nominal quota %dm", cq.Name, used, rq.Name, f.Name, nominal))
					case root != "" && bl >= 0 && used > nominal+bl:
						problems = append(problems, fmt.Sprintf("%s uses %dm of %s in %s, over nominal %dm plus borrowing limit %dm", cq.Name, used, rq.Name, f.Name, nominal, bl))
					}
					keep := int64(0)
					if ll >= 0 {
						keep = max(nominal-ll, 0)
					}
					pool[root][fr{f.Name, rq.Name}] += nominal - keep
					drawn[root][fr{f.Name, rq.Name}] += max(used-keep, 0)
				}
			}
		}
	}
	for _, co := range sc.Cohorts {
		var spec struct {
			Spec struct {
				ResourceGroups []kueue.ResourceGroup `json:"resourceGroups"`
			} `json:"spec"`
		}
		data, _ := json.Marshal(co.Object)
		_ = json.Unmarshal(data, &spec)
		root := co.GetName()
		for parents := sc.parents(); parents[root] != ""; {
			root = parents[root]
		}
		for _, g := range spec.Spec.ResourceGroups {
			for _, f := range g.Flavors {
				for _, rq := range f.Resources {
					if pool[root] == nil {
						pool[root], drawn[root] = map[fr]int64{}, map[fr]int64{}
					}
					pool[root][fr{f.Name, rq.Name}] += rq.NominalQuota.MilliValue()
				}
			}
		}
	}
	roots := make([]string, 0, len(drawn))
	for root := range drawn {
		roots = append(roots, root)
	}
	sort.Strings(roots)
	for _, root := range roots {
		if root == "" {
			continue
		}
		for k, d := range drawn[root] {
			if d > pool[root][k] {
				problems = append(problems, fmt.Sprintf("cohort %s lends %dm of %s in %s, over the %dm its lending limits allow", root, d, k.r, k.f, pool[root][k]))
			}
		}
	}
	slices.Sort(problems)
	return problems
}

// The limit check can fail: usage over each kind of limit is reported.
func TestLimitProblems(t *testing.T) {
	cq := func(name, cohort, quota string) string {
		spec := ""
		if cohort != "" {
			spec = "\n  cohortName: " + cohort
		}
		return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %s}
spec:%s
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f0, resources: [{name: cpu, %s}]}]}]
---
`, name, spec, quota)
	}
	sc, err := Parse("limits.yaml", []byte(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f0}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
---
`+cq("alone", "", "nominalQuota: 2")+cq("borrower", "co", "nominalQuota: 1, borrowingLimit: 2")+cq("lender", "co", "nominalQuota: 4, lendingLimit: 1")+`name: limits
workloads:
  - name: a
    clusterQueue: alone
    resources: {cpu: 1}
    duration: 1m
`))
	if err != nil {
		t.Fatal(err)
	}
	use := func(cq string, cpu int64) usageOf {
		u := usageOf{}
		u.add(cq, "f0", corev1.ResourceCPU, cpu*1000)
		return u
	}
	cases := map[string]struct {
		usage usageOf
		want  []string
	}{
		"within every limit": {usage: usageOf{"alone": use("alone", 2)["alone"], "borrower": use("borrower", 2)["borrower"], "lender": use("lender", 3)["lender"]}},
		"over a nominal quota without a cohort": {
			usage: use("alone", 3),
			want:  []string{"alone uses 3000m of cpu in f0, over its nominal quota 2000m"},
		},
		"over a borrowing limit": {
			usage: use("borrower", 4),
			want: []string{
				"borrower uses 4000m of cpu in f0, over nominal 1000m plus borrowing limit 2000m",
				"cohort co lends 4000m of cpu in f0, over the 2000m its lending limits allow",
			},
		},
		"over a lending limit": {
			usage: usageOf{"borrower": use("borrower", 3)["borrower"], "lender": use("lender", 3)["lender"]},
			want:  []string{"cohort co lends 3000m of cpu in f0, over the 2000m its lending limits allow"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, limitProblems(sc, tc.usage)); diff != "" {
				t.Errorf("limitProblems (-want +got):\n%s", diff)
			}
		})
	}
}

// A deep queue: 1,000 workloads that all fit arrive at once in four ClusterQueues. The budget
// admits them in far fewer cycles, with the same decisions (who is admitted when, and where).
func TestHeadsPerCycleDrainsDeepQueues(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f0}\n---\n")
	for i := range 4 {
		fmt.Fprintf(&b, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq%d}\nspec:\n"+
			"  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f0, resources: [{name: cpu, nominalQuota: 250}]}]}]\n---\n", i)
	}
	b.WriteString("name: deep\nworkloads:\n")
	for i := range 4 {
		fmt.Fprintf(&b, "  - name: w%d\n    clusterQueue: cq%d\n    copies: 250\n    resources: {cpu: 1}\n    duration: 1h\n", i, i)
	}
	run := func(budget int32) (*Result, time.Duration) {
		sc, err := Parse("deep.yaml", []byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		sc.Timeshare.HeadsPerCycle = ptr.To(budget)
		started := time.Now()
		res, err := Run(context.Background(), sc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res, time.Since(started)
	}
	one, oneTook := run(1)
	many, manyTook := run(32)
	t.Logf("1,000 workloads that fit, arriving at once in 4 ClusterQueues: %d cycles in %s at headsPerCycle 1, %d in %s at 32",
		one.Cycles, oneTook.Round(time.Millisecond), many.Cycles, manyTook.Round(time.Millisecond))
	if many.Cycles*10 > one.Cycles {
		t.Errorf("cycles: %d at headsPerCycle 32, want at most a tenth of the %d at 1", many.Cycles, one.Cycles)
	}
	// The same admissions at the same instants, whatever the order within an instant.
	sorted := func(events []Event) []Event {
		out := slices.Clone(events)
		slices.SortFunc(out, func(a, b Event) int {
			return cmpEvents(a, b)
		})
		return out
	}
	if diff := cmp.Diff(sorted(one.Events), sorted(many.Events)); diff != "" {
		t.Errorf("events at headsPerCycle 32 differ from those at 1 (-1 +32):\n%s", diff)
	}
	if len(one.Events) < 1000 {
		t.Errorf("%d events, want at least the 1,000 admissions", len(one.Events))
	}
}

func cmpEvents(a, b Event) int {
	return strings.Compare(fmt.Sprintf("%012d %+v", a.At, a), fmt.Sprintf("%012d %+v", b.At, b))
}
