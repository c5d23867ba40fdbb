package simulator

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
)

var (
	rotationCases = flag.Int("rotation-cases", 300, "generated scenarios the rotation property checker runs")
	rotationSeed  = flag.Int64("rotation-seed", 1, "first seed of the generated scenarios (0: from the clock)")
	scenarioSeed  = flag.Int64("scenario-seed", 0, "first seed of the scenarios seeded from the clock, to run a failure again (0: from the clock)")
)

// The rotation property checker runs generated scenarios through the simulator (the manager's
// scheduler, preemptor and victim policy) and checks, on every run, the invariants below. They
// are stated in docs/time-based-preemption.md ("Guarantees") in the same words.
//
//  1. Work conservation. At no instant, once scheduling has settled, does a pending workload that
//     fits without preempting anyone (in some flavor of each resource group, by the ClusterQueue's
//     available quota, borrowing included) stay pending for longer than one scheduling interval.
//     Exceptions, where upstream Kueue holds quota on purpose: under StrictFIFO, a workload that
//     is not first in line (highest priority, then turn time); in a cohort, a workload while
//     another ClusterQueue of the cohort tree has a pending workload that does not fit (its head
//     may hold the quota it waits for, which in an overdrawn cohort can include the unused nominal
//     quota of others), or a workload behind one of its
//     own ClusterQueue's that does not fit (a head whose reclaim is blocked keeps the quota); and
//     a workload in its expected-runtime cooldown.
//  2. No protected workload is preempted. A victim in the preemptor's ClusterQueue has run for at
//     least its preemptMinRuntime; a victim elsewhere for at least its reclaimMinRuntime (as
//     resolved: the ClusterQueue's value or the manager default; the generator sets none on
//     Cohorts); a victim whose priority class tolerates the preemptor's priority has run for at
//     least its toleration-seconds, and one that tolerates it forever is never preempted by it.
//  3. No short turns. A workload preempted for time-sharing (InClusterQueueTimeBased) had held its
//     quota for strictly longer than minAdmitDuration. Within a ClusterQueue with minAdmitDuration,
//     a same-priority workload preempted before that long only by upstream's rule for newer
//     workloads: it entered the queue after the preemptor's turn time.
//  4. No starvation, where the rules allow a turn: in a ClusterQueue without a cohort, with
//     minAdmitDuration W under LowerOrNewerEqualPriority and no toleration that lasts forever, a
//     workload X of the highest priority there, that fits the ClusterQueue alone (and, under
//     StrictFIFO, behind only workloads that do too), never waits through a stretch of more than
//     P + S without an admission in its ClusterQueue, where P is the longest protection that
//     applies there (W, the preemptMinRuntime, the longest finite toleration-seconds) and S is
//     twice the scheduling interval plus a second. Whoever has the turn (X, or one of the k
//     same-priority workloads ahead of X in line when it started waiting) can take it at the
//     latest P after the last admission; so X is admitted within (k + b + 1) x (P + S) of the
//     start of its wait, b being the other admissions meanwhile (quota freed by completions
//     taken without preemption, lower priorities preempted, turns repeated).
func TestRotationProperties(t *testing.T) {
	cases := *rotationCases
	if raceDetector && !flagSet("rotation-cases") {
		// Under the race detector every scenario costs five to ten times as much; a few suffice to
		// exercise the concurrent evictions, and make test runs the full set without it.
		cases = 30
	}
	seed := *rotationSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("rotation property checker: %d scenarios from seed %d (rerun with -rotation-seed=%d)", cases, seed, seed)
	started := time.Now()
	failed := 0
	for i := range cases {
		if i > 0 && i%1000 == 0 {
			// Long runs take tens of minutes on two cores: say how far they got.
			t.Logf("%d of %d scenarios in %s, %d failing", i, cases, time.Since(started).Round(time.Second), failed)
		}
		s := seed + int64(i)
		m := generate(s)
		problems, err := checkModel(m)
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", s, err, m.YAML())
		}
		if len(problems) == 0 {
			continue
		}
		failed++
		t.Logf("seed %d fails (%s); shrinking it", s, problems[0])
		small, smallProblems := shrink(m, problems)
		t.Errorf("seed %d: %d invariant violations, first: %s\nshrunk scenario (%s):\n%s", s, len(problems), problems[0], smallProblems[0], small.YAML())
		if dir := os.Getenv("ROTATION_FAILURE_DIR"); dir != "" {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d.yaml", s)), []byte(small.YAML()), 0o644)
		}
		if failed >= 3 {
			t.Fatalf("stopping after %d failing scenarios", failed)
		}
	}
	t.Logf("%d scenarios in %s", cases, time.Since(started).Round(time.Millisecond))
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// TestRotationRegressions runs the scenarios the checker once found failing (testdata/rotation),
// each kept in its shrunk form, and checks every invariant on them.
func TestRotationRegressions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "rotation", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios in testdata/rotation")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			problems, err := checkScenario(sc)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
}

// The checker must be able to fail: with the features off (upstream's semantics) the unfit-job
// example starves four of its jobs, and the work conservation check catches a scheduler that
// leaves quota idle. Both are what the checker reported before the fixes it led to.
func TestRotationCheckerFindsStalls(t *testing.T) {
	unfit, err := Load(filepath.Join("..", "..", "examples", "scenarios", "unfit-job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	problems, err := checkScenarioIn(unfit, ModeUpstream)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(problems, func(p string) bool { return kind(p) == "starvation" }) {
		t.Errorf("upstream semantics on unfit-job.yaml: no starvation found; problems: %q", problems)
	}
	// A checker that observes an instant where a workload fits and is still pending an interval
	// later reports it.
	c := newChecker(unfit)
	c.idleSince["late-1"] = 0
	c.observe(2*c.interval, nil)
	if len(c.problems) == 0 || kind(c.problems[0]) != "work conservation" {
		t.Errorf("idle quota not reported: %q", c.problems)
	}
}

// shrink removes parts of a failing scenario while it keeps failing, up to a bounded number of
// runs.
func shrink(m *genModel, problems []string) (*genModel, []string) {
	budget := 300
	deadline := time.Now().Add(3 * time.Minute)
	for progress := true; progress && budget > 0; {
		progress = false
		for _, smaller := range m.shrinkSteps() {
			if budget--; budget < 0 || time.Now().After(deadline) {
				budget = 0
				break
			}
			p, err := checkModel(smaller)
			if err == nil && len(p) > 0 && kind(p[0]) == kind(problems[0]) {
				m, problems, progress = smaller, p, true
				break
			}
		}
	}
	return m, problems
}

// kind is the invariant a violation is about ("work conservation", "starvation", ...).
func kind(problem string) string {
	k, _, _ := strings.Cut(problem, ":")
	return k
}

func checkModel(m *genModel) ([]string, error) {
	sc, err := Parse(fmt.Sprintf("generated-%d.yaml", m.Seed), []byte(m.YAML()))
	if err != nil {
		return nil, fmt.Errorf("generated scenario is invalid: %w", err)
	}
	return checkScenario(sc)
}

// checkScenario runs sc and returns every invariant violation found.
func checkScenario(sc *Scenario) ([]string, error) {
	return checkScenarioIn(sc, ModeTimeshare)
}

func checkScenarioIn(sc *Scenario, mode Mode) ([]string, error) {
	c := newChecker(sc)
	res, err := Run(context.Background(), sc, Options{Mode: mode, observe: c.observe})
	if err != nil {
		return nil, err
	}
	for _, n := range res.Notes {
		if strings.Contains(n, "did not settle") {
			c.failf("the simulation did not settle: %s", n)
		}
	}
	c.verify(res)
	return c.problems, nil
}

type checker struct {
	sc       *Scenario
	interval time.Duration
	specs    map[string]WorkloadSpec
	// idleSince is when each pending workload was first seen fitting without preemption.
	idleSince map[string]time.Duration
	problems  []string
}

func newChecker(sc *Scenario) *checker {
	c := &checker{sc: sc, interval: sc.schedulingInterval(), specs: map[string]WorkloadSpec{}, idleSince: map[string]time.Duration{}}
	for _, s := range sc.WorkloadSpecs() {
		c.specs[s.Name] = s
	}
	return c
}

func (c *checker) failf(format string, args ...any) {
	if len(c.problems) < 20 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

// observe checks work conservation at an instant where scheduling has settled.
func (c *checker) observe(now time.Duration, w *world) {
	// The state between the previous instant and now did not change: a workload that fitted then
	// and was already idle-fitting for longer than an interval by now is a violation.
	for name, since := range c.idleSince {
		if now-since > c.interval {
			c.failf("work conservation: %s fitted without preemption from +%s and was still pending at +%s", name, since, now)
			c.idleSince = map[string]time.Duration{}
			break
		}
	}
	if w == nil {
		return
	}
	c.checkLimits(now, w)
	snap, err := w.cache.Snapshot(w.ctx)
	if err != nil {
		c.failf("snapshot at +%s: %v", FormatOffset(now), err)
		return
	}
	byCQ := map[string][]*pend{}
	for _, j := range w.jobs {
		if j.state != pending {
			continue
		}
		wl := w.seen[j.key]
		if wl == nil || !workload.IsActive(wl) {
			// Deactivated by its owner: not waiting.
			continue
		}
		p := &pend{j: j, wl: wl, turn: wl.CreationTimestamp.Time}
		if cond := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == timebased.Reason {
			p.turn = cond.LastTransitionTime.Time
			p.rotated = true
		}
		// In a ClusterQueue that takes turns, a workload that left the quota for any reason waits
		// from then, at the back of the line (docs/security.md, row 2 of the tenant table).
		if cond := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); cond != nil && cond.Status == metav1.ConditionTrue &&
			c.window(c.sc.queueView(j.spec.ClusterQueue)) > 0 && cond.LastTransitionTime.After(p.turn) {
			p.turn = cond.LastTransitionTime.Time
			p.rotated = true
		}
		if er, ok := annotations.ParseExpectedRuntime(wl.Annotations); ok && !er.NotBefore.IsZero() && er.NotBefore.After(w.clock.Now()) {
			p.cooldown = true
		}
		p.fits = fitsFree(snap.ClusterQueue(kueue.ClusterQueueReference(j.spec.ClusterQueue)), j.spec)
		byCQ[j.spec.ClusterQueue] = append(byCQ[j.spec.ClusterQueue], p)
	}
	ahead := func(a, b *pend) bool {
		if a.j.spec.Priority != b.j.spec.Priority {
			return a.j.spec.Priority > b.j.spec.Priority
		}
		if !a.turn.Equal(b.turn) {
			return a.turn.Before(b.turn)
		}
		// Rotated out in the second another joined: behind it.
		if a.rotated != b.rotated {
			return b.rotated
		}
		return a.j.uid < b.j.uid
	}
	fitting := map[string]bool{}
	for cqName, list := range byCQ {
		sort.Slice(list, func(i, k int) bool { return ahead(list[i], list[k]) })
		cq := c.sc.queueView(cqName)
		for i, p := range list {
			if !p.fits || p.cooldown {
				continue
			}
			if cq.Spec.QueueingStrategy == string(kueue.StrictFIFO) && i > 0 {
				continue
			}
			if cq.Spec.Cohort != "" {
				if slices.ContainsFunc(list[:i], func(o *pend) bool { return !o.fits }) {
					continue
				}
				if c.othersWaiting(cqName, byCQ) {
					continue
				}
			}
			fitting[p.j.spec.Name] = true
		}
	}
	for name := range c.idleSince {
		if !fitting[name] {
			delete(c.idleSince, name)
		}
	}
	for name := range fitting {
		if _, ok := c.idleSince[name]; !ok {
			c.idleSince[name] = now
		}
	}
}

// pend is a pending workload as the work conservation check sees it.
type pend struct {
	j        *job
	wl       *kueue.Workload
	turn     time.Time
	rotated  bool
	fits     bool
	cooldown bool
}

// othersWaiting reports whether another ClusterQueue of cq's cohort tree has a pending workload
// that does not fit.
func (c *checker) othersWaiting(cq string, byCQ map[string][]*pend) bool {
	root := c.sc.cohortRoot(cq)
	for other, list := range byCQ {
		if other == cq || c.sc.cohortRoot(other) != root {
			continue
		}
		for _, p := range list {
			if !p.fits {
				return true
			}
		}
	}
	return false
}

// fitsFree reports whether spec fits cq without preemption (one flavor per resource group, as the
// flavor assigner gives), borrowing included.
func fitsFree(cq *schdcache.ClusterQueueSnapshot, spec WorkloadSpec) bool {
	if cq == nil {
		return false
	}
	for i := range cq.ResourceGroups {
		rg := &cq.ResourceGroups[i]
		var asked []corev1.ResourceName
		for r := range spec.Requests {
			if rg.CoveredResources.Has(r) {
				asked = append(asked, r)
			}
		}
		if len(asked) == 0 {
			continue
		}
		groupFits := false
		for _, f := range rg.Flavors {
			ok := true
			for _, r := range asked {
				q := spec.Requests[r]
				v := resources.NewAmount(resources.AmountFromQuantity(r, q).Int64() * int64(spec.Pods))
				if cq.Available(resources.FlavorResource{Flavor: f, Resource: r}).Cmp(v) < 0 {
					ok = false
					break
				}
			}
			groupFits = groupFits || ok
		}
		if !groupFits {
			return false
		}
	}
	return true
}

// fitsAlone reports whether spec fits the nominal quota of one flavor of cq in each resource group.
func (s *Scenario) fitsAlone(cqName string, spec WorkloadSpec) bool {
	cq := s.queueView(cqName)
	if cq == nil {
		return false
	}
	for r, q := range spec.Requests {
		need := q.AsApproximateFloat64() * float64(spec.Pods)
		ok := false
		for _, g := range cq.Spec.ResourceGroups {
			for _, f := range g.Flavors {
				for _, rq := range f.Resources {
					if rq.Name == r && rq.NominalQuota.AsApproximateFloat64() >= need {
						ok = true
					}
				}
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (s *Scenario) cohortRoot(cq string) string {
	c := s.queueView(cq)
	if c == nil || c.Spec.Cohort == "" {
		return ""
	}
	parents := s.parents()
	name := c.Spec.Cohort
	for i := 0; parents[name] != "" && i < 10; i++ {
		name = parents[name]
	}
	return name
}

// classOf returns the scenario's priority class of a workload, if any.
func (c *checker) classOf(spec WorkloadSpec) *classView {
	for _, pc := range c.sc.WorkloadPriorityClasses {
		if pc.Name == spec.PriorityClass {
			return &classView{pc.Annotations, pc.Value}
		}
	}
	for _, pc := range c.sc.PriorityClasses {
		if pc.Name == spec.PriorityClass {
			return &classView{pc.Annotations, pc.Value}
		}
	}
	return nil
}

// classView is what the checker reads of a priority class.
type classView struct {
	Annotations map[string]string
	Value       int32
}

// queueView is what the checker reads of a ClusterQueue's object.
type queueView struct {
	Name string
	Spec struct {
		Cohort           string                `json:"cohortName"`
		QueueingStrategy string                `json:"queueingStrategy"`
		ResourceGroups   []kueue.ResourceGroup `json:"resourceGroups"`
		Preemption       struct {
			WithinClusterQueue                   string
			PreemptMinRuntime, ReclaimMinRuntime *metav1.Duration
			WithinClusterQueueConfig             struct{ MinAdmitDuration *metav1.Duration }
		}
	}
}

func (s *Scenario) queueView(name string) *queueView {
	for _, u := range s.ClusterQueues {
		if u.GetName() == name {
			v := &queueView{Name: name}
			data, _ := json.Marshal(u.Object)
			_ = json.Unmarshal(data, v)
			return v
		}
	}
	return nil
}

func (s *Scenario) parents() map[string]string {
	out := map[string]string{}
	for _, co := range s.Cohorts {
		out[co.GetName()], _, _ = unstructured.NestedString(co.Object, "spec", "parentName")
	}
	return out
}

// classToleration returns a class's toleration: the lowest priority that may preempt, and for how
// long after admission (negative: forever); ok is false without one.
func classToleration(pc *classView) (minimum int32, seconds int64, ok bool) {
	if pc == nil {
		return 0, 0, false
	}
	raw, has := pc.Annotations["preemption-toleration.scheduling.x-k8s.io/toleration-seconds"]
	if !has {
		return 0, 0, false
	}
	seconds, _ = strconv.ParseInt(raw, 10, 64)
	if seconds == 0 {
		return 0, 0, false
	}
	minimum = pc.Value + 1
	if raw, has := pc.Annotations["preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority"]; has {
		v, _ := strconv.ParseInt(raw, 10, 32)
		minimum = int32(v)
	}
	return minimum, seconds, true
}

// preemptMinRuntime is the preemptMinRuntime of cq as resolved (the generator sets none on
// Cohorts): its own value, else the manager default.
func (c *checker) preemptMinRuntime(cq *queueView) time.Duration {
	if d := cq.Spec.Preemption.PreemptMinRuntime; d != nil {
		return d.Duration
	}
	if c.sc.Timeshare.DefaultPreemptMinRuntime != nil {
		return c.sc.Timeshare.DefaultPreemptMinRuntime.Duration
	}
	return 0
}

// reclaimMinRuntime is the reclaimMinRuntime protecting a victim of victimCQ against preemptorCQ:
// by the Queue method, or by LCA when the victim's ClusterQueue is a child of the lowest common
// ancestor, the victim ClusterQueue's own value; otherwise (no Cohort sets any) the default.
func (c *checker) reclaimMinRuntime(victimCQ, preemptorCQ *queueView) time.Duration {
	def := time.Duration(0)
	if c.sc.Timeshare.DefaultReclaimMinRuntime != nil {
		def = c.sc.Timeshare.DefaultReclaimMinRuntime.Duration
	}
	own := victimCQ.Spec.Preemption.ReclaimMinRuntime
	if own == nil {
		return def
	}
	if c.sc.Timeshare.ReclaimResolveMethod == "Queue" || c.lca(victimCQ, preemptorCQ) == victimCQ.Spec.Cohort {
		return own.Duration
	}
	return def
}

func (c *checker) cohortPath(cq *queueView) []string {
	parents := c.sc.parents()
	var path []string
	for name := cq.Spec.Cohort; name != "" && len(path) < 10; name = parents[name] {
		path = append(path, name)
	}
	return path
}

func (c *checker) lca(a, b *queueView) string {
	pb := c.cohortPath(b)
	for _, name := range c.cohortPath(a) {
		if slices.Contains(pb, name) {
			return name
		}
	}
	return ""
}

func (c *checker) window(cq *queueView) time.Duration {
	if d := cq.Spec.Preemption.WithinClusterQueueConfig.MinAdmitDuration; d != nil {
		return d.Duration
	}
	return 0
}

// verify checks the invariants that read the run's events.
func (c *checker) verify(res *Result) {
	lastAdmitted := map[string]time.Duration{}
	turnTime := map[string]time.Duration{}
	admissions := map[string][]time.Duration{}
	for name, spec := range c.specs {
		turnTime[name] = spec.Arrival
	}
	for _, e := range res.Events {
		switch e.Kind {
		case EventAdmitted:
			lastAdmitted[e.Workload] = e.At
			admissions[e.ClusterQueue] = append(admissions[e.ClusterQueue], e.At)
		case EventPreempted:
			c.checkPreemption(e, lastAdmitted, turnTime)
			// As the scheduler reads it: the last preemption, if it was for time-sharing.
			turnTime[e.Workload] = c.specs[e.Workload].Arrival
			if e.Reason == timebased.Reason {
				turnTime[e.Workload] = e.At
			}
		}
	}
	c.checkStarvation(res, admissions)
}

func (c *checker) checkPreemption(e Event, lastAdmitted, turnTime map[string]time.Duration) {
	victim, okV := c.specs[e.Workload]
	by, okB := c.specs[e.By]
	if !okV || !okB {
		return
	}
	// Conditions keep their times to the second, truncated: a protection counted from one may
	// end up to a second early by the simulated clock.
	held := e.At - lastAdmitted[e.Workload] + time.Second
	vcq, bcq := c.sc.queueView(victim.ClusterQueue), c.sc.queueView(by.ClusterQueue)
	if vcq == nil || bcq == nil {
		return
	}
	if vcq.Name == bcq.Name {
		if d := c.preemptMinRuntime(vcq); held < d {
			c.failf("protection: %s preempted by %s at +%s (%s) after %s, inside preemptMinRuntime %s", e.Workload, e.By, FormatOffset(e.At), e.Reason, held, d)
		}
	} else if d := c.reclaimMinRuntime(vcq, bcq); held < d {
		c.failf("protection: %s reclaimed by %s at +%s (%s) after %s, inside reclaimMinRuntime %s", e.Workload, e.By, FormatOffset(e.At), e.Reason, held, d)
	}
	if minimum, seconds, ok := classToleration(c.classOf(victim)); ok && by.Priority < minimum {
		if seconds < 0 || held < time.Duration(seconds)*time.Second {
			c.failf("protection: %s preempted by %s (priority %d) at +%s after %s, which its class tolerates (minimum %d, %ds)", e.Workload, e.By, by.Priority, FormatOffset(e.At), held, minimum, seconds)
		}
	}
	w := c.window(vcq)
	if e.Reason == timebased.Reason && held <= w {
		c.failf("short turn: %s preempted for time-sharing by %s at +%s after %s, not longer than minAdmitDuration %s", e.Workload, e.By, FormatOffset(e.At), held, w)
	}
	if vcq.Name == bcq.Name && w > 0 && victim.Priority == by.Priority && held <= w && e.Reason == kueue.InClusterQueueReason {
		if victim.Arrival <= turnTime[e.By] {
			c.failf("short turn: %s preempted by %s (%s) at +%s after %s, though it entered the queue (+%s) before the preemptor's turn time (+%s)", e.Workload, e.By, e.Reason, FormatOffset(e.At), held, FormatOffset(victim.Arrival), FormatOffset(turnTime[e.By]))
		}
	}
}

// checkStarvation checks invariant 4 on the ClusterQueues where it applies.
func (c *checker) checkStarvation(res *Result, admissions map[string][]time.Duration) {
	byCQ := map[string][]WorkloadSpec{}
	for _, s := range c.specs {
		byCQ[s.ClusterQueue] = append(byCQ[s.ClusterQueue], s)
	}
	results := map[string]WorkloadResult{}
	for _, r := range res.Workloads {
		results[r.Name] = r
	}
	slack := 2*c.interval + time.Second
	for _, u := range c.sc.ClusterQueues {
		cq := c.sc.queueView(u.GetName())
		w := c.window(cq)
		if w <= 0 || cq.Spec.Cohort != "" || cq.Spec.Preemption.WithinClusterQueue != string(kueue.PreemptionPolicyLowerOrNewerEqualPriority) {
			continue
		}
		specs := byCQ[cq.Name]
		top := int32(-1 << 31)
		protection := max(w, c.preemptMinRuntime(cq))
		forever := false
		for _, s := range specs {
			top = max(top, s.Priority)
			if _, seconds, ok := classToleration(c.classOf(s)); ok {
				if seconds < 0 {
					forever = true
				}
				protection = max(protection, time.Duration(seconds)*time.Second)
			}
		}
		if forever {
			continue
		}
		if cq.Spec.QueueingStrategy == string(kueue.StrictFIFO) && slices.ContainsFunc(specs, func(s WorkloadSpec) bool {
			return s.Priority == top && !c.sc.fitsAlone(cq.Name, s)
		}) {
			continue
		}
		limit := protection + slack
		adm := admissions[cq.Name]
		for _, s := range specs {
			if s.Priority != top || !c.sc.fitsAlone(cq.Name, s) {
				continue
			}
			for _, iv := range results[s.Name].Intervals {
				if iv.Running {
					continue
				}
				last := iv.From
				for _, a := range adm {
					if a <= iv.From || a > iv.To {
						continue
					}
					if a-last > limit {
						break
					}
					last = a
				}
				if end := min(iv.To, res.End); end-last > limit {
					c.failf("starvation: %s waited from +%s to +%s, with no admission in ClusterQueue %s from +%s for longer than %s (longest protection %s)", s.Name, FormatOffset(iv.From), FormatOffset(iv.To), cq.Name, FormatOffset(last), limit, protection)
				}
			}
		}
	}
}

// TestRotationWithBudget runs generated scenarios with a tight preemption budget on every
// ClusterQueue: turns neither spend nor wait on it, so every invariant still holds.
func TestRotationWithBudget(t *testing.T) {
	cases := min(*rotationCases, 60)
	for i := range cases {
		s := *rotationSeed + int64(i)
		m := generate(s)
		m.Budget = &genBudget{Max: 1, Period: time.Hour}
		problems, err := checkModel(m)
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", s, err, m.YAML())
		}
		if len(problems) > 0 {
			t.Errorf("seed %d with a budget: %d invariant violations, first: %s\n%s", s, len(problems), problems[0], m.YAML())
		}
	}
}

// The shape of a livelock suspected before: a StrictFIFO ClusterQueue where a workload evicted
// at its expected runtime, with no requeue delay, is at once the oldest head and retakes the
// quota from the one that preempted it, again and again. Generated scenarios forced into that
// shape (every ClusterQueue StrictFIFO, half the workloads declaring an expected runtime shorter
// than their run) pass every invariant of the rotation checker, "the simulation settled" among
// them, which a loop within an instant breaks.
func TestStrictFIFOExpectedRuntimeRetakes(t *testing.T) {
	cases, seed := generatedScenarios(t, "StrictFIFO with expected runtimes", 40, 6)
	expected := 0
	for i := range cases {
		s := seed + int64(i)
		m := generate(s)
		for c := range m.CQs {
			m.CQs[c].Strict = true
		}
		for w := range m.WLs {
			if w%2 == 0 && m.WLs[w].Duration > 10*time.Minute {
				m.WLs[w].Expected = m.WLs[w].Duration / 2
				expected++
			}
		}
		problems, err := checkModel(m)
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", s, err, m.YAML())
		}
		if len(problems) > 0 {
			t.Fatalf("seed %d (forced StrictFIFO, expected runtimes): %d violations, first: %s\n%s", s, len(problems), problems[0], m.YAML())
		}
	}
	if expected == 0 {
		t.Fatal("no workload declared an expected runtime: the shape was not tried")
	}
}
