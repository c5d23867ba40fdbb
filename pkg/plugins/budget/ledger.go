package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Ledger is what the preemption budget keeps: each queue's budget, the tree they form and the
// preemptions they paid for. It is in memory only; Load rebuilds it on start from the Workloads'
// conditions, which only the manager writes. The settings store keeps one, fed with the
// ClusterQueues and Cohorts it watches, and gives it to the unit and the plugin as their source.
// The zero Ledger is ready to use.
//
// The ledger keeps only preemptions that a budget counts (one on the victim's path, or the
// configuration's default), for as long as the slowest bucket takes to refill, indexed by queue
// and by victim so that a candidate's buckets are read without a scan: a budget set later counts
// the preemptions from then on (after a restart, those the Workloads' conditions still record).
type Ledger struct {
	mu           sync.RWMutex
	def          *tsapi.PreemptionBudget
	cq           map[kueue.ClusterQueueReference]*tsapi.PreemptionBudget
	cohorts      map[kueue.CohortReference]*tsapi.PreemptionBudget
	cqParent     map[kueue.ClusterQueueReference]kueue.CohortReference
	cohortParent map[kueue.CohortReference]kueue.CohortReference
	// byNode and byVictim are the ledger: the times of the preemptions below each queue, and of
	// each victim's, sorted.
	byNode   map[node][]time.Time
	byVictim map[types.UID][]time.Time
	// entries counts the times the ledger holds; at pruneAt, every list is pruned.
	entries, pruneAt int
}

// preemption is one paid for: its victim, the queues above it then (ClusterQueue first) and when.
type preemption struct {
	uid  types.UID
	path []node
	at   time.Time
}

// node is a queue of the tree.
type node struct {
	kind, name string
}

func (n node) String() string { return n.kind + " " + n.name }

// SetDefault sets the manager configuration's budget.
func (st *Ledger) SetDefault(b *tsapi.PreemptionBudget) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.def = b
}

// SetClusterQueue stores the budget and the parent cohort of a ClusterQueue (u nil: it is gone);
// an invalid budget counts as none, as the other settings. It reports a change.
func (st *Ledger) SetClusterQueue(name kueue.ClusterQueueReference, u *unstructured.Unstructured) bool {
	b, parent := readBudget(u, "cohortName")
	st.mu.Lock()
	defer st.mu.Unlock()
	return setNode(&st.cq, &st.cqParent, name, b, parent)
}

// SetCohort is SetClusterQueue for a Cohort.
func (st *Ledger) SetCohort(name kueue.CohortReference, u *unstructured.Unstructured) bool {
	b, parent := readBudget(u, "parentName")
	st.mu.Lock()
	defer st.mu.Unlock()
	return setNode(&st.cohorts, &st.cohortParent, name, b, parent)
}

// setNode stores queue k's budget and parent cohort ("": none) in budgets and parents, made when
// nil, and reports whether either changed.
func setNode[K comparable](budgets *map[K]*tsapi.PreemptionBudget, parents *map[K]kueue.CohortReference, k K, b *tsapi.PreemptionBudget, parent string) bool {
	if *budgets == nil {
		*budgets, *parents = map[K]*tsapi.PreemptionBudget{}, map[K]kueue.CohortReference{}
	}
	changed := setBudget(*budgets, k, b)
	p := kueue.CohortReference(parent)
	if (*parents)[k] != p {
		changed = true
	}
	if p == "" {
		delete(*parents, k)
	} else {
		(*parents)[k] = p
	}
	return changed
}

func setBudget[K comparable](m map[K]*tsapi.PreemptionBudget, k K, b *tsapi.PreemptionBudget) bool {
	old, ok := m[k]
	if b == nil {
		delete(m, k)
		return ok
	}
	m[k] = b
	return !ok || Of(old) != Of(b) || fmt.Sprint(old.PerWorkload) != fmt.Sprint(b.PerWorkload)
}

// readBudget is u's valid budget, if any, and its parent's name, read from spec.<parentField>.
func readBudget(u *unstructured.Unstructured, parentField string) (*tsapi.PreemptionBudget, string) {
	if u == nil {
		return nil, ""
	}
	parent, _, _ := unstructured.NestedString(u.Object, "spec", parentField)
	spec, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec")
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, parent
	}
	b, err := tsapi.ParsePreemptionBudget(raw)
	if err != nil || len(b.Validate(nil)) > 0 {
		return nil, parent
	}
	return b, parent
}

// pathLocked is cq and the cohorts above it, nearest first; a cycle ends the walk.
func (st *Ledger) pathLocked(cq kueue.ClusterQueueReference) []node {
	path := []node{{kind: "ClusterQueue", name: string(cq)}}
	seen := map[kueue.CohortReference]bool{}
	for c := st.cqParent[cq]; c != "" && !seen[c]; c = st.cohortParent[c] {
		seen[c] = true
		path = append(path, node{kind: "Cohort", name: string(c)})
	}
	return path
}

// budgetOfLocked is the budget n sets itself.
func (st *Ledger) budgetOfLocked(n node) *tsapi.PreemptionBudget {
	if n.kind == "ClusterQueue" {
		return st.cq[kueue.ClusterQueueReference(n.name)]
	}
	return st.cohorts[kueue.CohortReference(n.name)]
}

// BudgetsOf gives the buckets wl, holding quota, needs a token from (Source): each budget on its
// path, else the configuration's default for its ClusterQueue, and the nearest perWorkload
// budget; nil when none.
func (st *Ledger) BudgetsOf(wl *kueue.Workload) *Budgets {
	if wl.Status.Admission == nil {
		return nil
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	if st.def == nil && len(st.cq) == 0 && len(st.cohorts) == 0 {
		return nil
	}
	path := st.pathLocked(wl.Status.Admission.ClusterQueue)
	var out Budgets
	var perWorkload *tsapi.PreemptionBudget
	perWorkloadOwner := ""
	for _, n := range path {
		b := st.budgetOfLocked(n)
		if b == nil {
			continue
		}
		out.Buckets = append(out.Buckets, Bucket{Owner: n.String(), Budget: Of(b), Spent: st.spentLocked(n)})
		if perWorkload == nil && b.PerWorkload != nil {
			perWorkload, perWorkloadOwner = b, n.String()
		}
	}
	if len(out.Buckets) == 0 && st.def != nil {
		out.Buckets = append(out.Buckets, Bucket{Owner: path[0].String() + " (the manager configuration's preemptionBudget)",
			Budget: Of(st.def), Spent: st.spentLocked(path[0])})
	}
	if perWorkload == nil && st.def != nil && st.def.PerWorkload != nil {
		perWorkload, perWorkloadOwner = st.def, "the manager configuration"
	}
	if w, ok := PerWorkloadOf(perWorkload); ok {
		spent := slices.Clone(st.byVictim[wl.UID])
		out.Buckets = append([]Bucket{{Owner: "perWorkload of " + perWorkloadOwner, Budget: w, Spent: spent}}, out.Buckets...)
	}
	if len(out.Buckets) == 0 {
		return nil
	}
	return &out
}

// spentLocked are the instants of the preemptions of workloads below n.
func (st *Ledger) spentLocked(n node) []time.Time {
	return slices.Clone(st.byNode[n])
}

// RecordPreemption enters the preemption of wl, holding quota in cq, at at. A preemption of the
// same admission already entered (an eviction written again, or one after its notice) is not
// entered twice.
func (st *Ledger) RecordPreemption(wl *kueue.Workload, cq kueue.ClusterQueueReference, at time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.recordLocked(preemption{uid: wl.UID, path: st.pathLocked(cq), at: at}, admittedAt(wl))
}

func (st *Ledger) recordLocked(p preemption, admitted time.Time) {
	if !st.countedLocked(p.path) {
		return
	}
	if prior := st.byVictim[p.uid]; len(prior) > 0 && !prior[len(prior)-1].Before(admitted) {
		return
	}
	if st.byNode == nil {
		st.byNode, st.byVictim = map[node][]time.Time{}, map[types.UID][]time.Time{}
	}
	keep := st.memoryLocked()
	st.byVictim[p.uid] = enter(st.byVictim[p.uid], p.at, keep)
	for _, n := range p.path {
		st.byNode[n] = enter(st.byNode[n], p.at, keep)
	}
	st.entries += 1 + len(p.path)
	if st.entries >= st.pruneAt {
		st.pruneLocked(p.at, keep)
	}
}

// countedLocked reports whether a budget counts the preemptions of a victim on path.
func (st *Ledger) countedLocked(path []node) bool {
	if st.def != nil {
		return true
	}
	for _, n := range path {
		if st.budgetOfLocked(n) != nil {
			return true
		}
	}
	return false
}

// enter inserts at into the sorted times, dropping those more than keep before it: a bucket has
// refilled since them.
func enter(times []time.Time, at time.Time, keep time.Duration) []time.Time {
	i, _ := slices.BinarySearchFunc(times, at, func(t, at time.Time) int { return t.Compare(at) })
	times = slices.Insert(times, i, at)
	return forget(times, at, keep)
}

// forget drops the times more than keep before now from the front of sorted times.
func forget(times []time.Time, now time.Time, keep time.Duration) []time.Time {
	i := 0
	for i < len(times) && now.Sub(times[i]) > keep {
		i++
	}
	return times[i:]
}

// pruneLocked forgets, in every list, what no bucket remembers at now; lists of queues and
// victims that see no more preemptions go too. The next pass is when the ledger has doubled.
func (st *Ledger) pruneLocked(now time.Time, keep time.Duration) {
	st.entries = pruneTimes(st.byNode, now, keep) + pruneTimes(st.byVictim, now, keep)
	st.pruneAt = 2*st.entries + 64
}

// pruneTimes forgets in each list of m what is more than keep before now, drops the lists left
// empty, and returns how many times remain.
func pruneTimes[K comparable](m map[K][]time.Time, now time.Time, keep time.Duration) int {
	left := 0
	for k, times := range m {
		if times = forget(times, now, keep); len(times) == 0 {
			delete(m, k)
		} else {
			m[k] = times
			left += len(times)
		}
	}
	return left
}

// memoryLocked is how long the ledger keeps a preemption: the longest time a bucket takes to
// refill from empty.
func (st *Ledger) memoryLocked() time.Duration {
	longest := time.Duration(0)
	consider := func(b *tsapi.PreemptionBudget) {
		if b == nil {
			return
		}
		bucket := Of(b)
		if bucket.Max > 0 {
			longest = max(longest, bucket.Period*time.Duration(bucket.Burst)/time.Duration(bucket.Max))
		}
		if w, ok := PerWorkloadOf(b); ok {
			longest = max(longest, w.Period)
		}
	}
	consider(st.def)
	for _, b := range st.cq {
		consider(b)
	}
	for _, b := range st.cohorts {
		consider(b)
	}
	return longest
}

// admittedAt is when wl's quota was last reserved.
func admittedAt(wl *kueue.Workload) time.Time {
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// preempteePath finds the victim's path ("/root/parent/cq") in the Preempted condition's message,
// which the preemptor writes.
var preempteePath = regexp.MustCompile(`preemptee path: (/[^;\s]*)`)

// preemptorPath finds the preemptor's path beside it.
var preemptorPath = regexp.MustCompile(`preemptor path: (/[^;\s]*)`)

// Load rebuilds the ledger from the Workloads' Preempted conditions: the status, which
// tenants cannot write, never their annotations. A condition reset by a later admission keeps
// only that admission's time, later than the preemption: the rebuilt ledger errs towards waiting.
// Turns and preemptions by another ClusterQueue are not entered: they do not spend budgets.
func (st *Ledger) Load(ctx context.Context, c client.Reader) error {
	var wls kueue.WorkloadList
	if err := c.List(ctx, &wls); err != nil {
		return fmt.Errorf("listing Workloads: %w", err)
	}
	// In time order, so that each entry goes at the end of its lists.
	var found []preemption
	for i := range wls.Items {
		if p, ok := preemptionOf(&wls.Items[i]); ok {
			found = append(found, p)
		}
	}
	slices.SortFunc(found, func(a, b preemption) int { return a.at.Compare(b.at) })
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, p := range found {
		st.recordLocked(p, time.Time{})
	}
	return nil
}

// clusterQueueOf is the last name of a path ("/root/parent/cq").
func clusterQueueOf(path string) string {
	return path[strings.LastIndex(path, "/")+1:]
}

// preemptionOf is the last preemption wl's Preempted condition records, if any.
func preemptionOf(wl *kueue.Workload) (preemption, bool) {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted)
	if c == nil {
		return preemption{}, false
	}
	reason := c.Reason
	if c.Status != metav1.ConditionTrue {
		// Reset by an admission: "Previously: <message>"; the reason is lost.
		if !strings.HasPrefix(c.Message, "Previously: ") {
			return preemption{}, false
		}
		reason = ""
	}
	if w, _ := policy.OwnReasonWordsOf(reason); w.Turn || turnWords(c.Message) {
		return preemption{}, false
	}
	m := preempteePath.FindStringSubmatch(c.Message)
	if m == nil {
		return preemption{}, false
	}
	// A preemption by another ClusterQueue does not spend budgets (Option).
	if by := preemptorPath.FindStringSubmatch(c.Message); by != nil && clusterQueueOf(by[1]) != clusterQueueOf(m[1]) {
		return preemption{}, false
	}
	names := strings.Split(strings.Trim(m[1], "/"), "/")
	path := make([]node, 0, len(names))
	for i := len(names) - 1; i >= 0; i-- {
		kind := "Cohort"
		if i == len(names)-1 {
			kind = "ClusterQueue"
		}
		path = append(path, node{kind: kind, name: names[i]})
	}
	return preemption{uid: wl.UID, path: path, at: c.LastTransitionTime.Time}, true
}

// turnWords reports whether message words a turn's preemption (a reset condition keeps the
// message, not the reason).
func turnWords(message string) bool {
	for _, w := range policy.OwnReasonWords() {
		if w.Turn && strings.Contains(message, w.Eviction) {
			return true
		}
	}
	return false
}
