// Package budget is the preemption budget: a ClusterQueue or Cohort may cap the preemptions of
// the workloads below it with a token bucket. It is the victim policy's unit for the budget
// (rules, facts, timing, webhook and configuration checks, metric); the settings store keeps the
// ledger of the preemptions paid (queuesettings), and the preemptor pays (preemption).
package budget

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// A victim needs a token from every bucket on its path, and from its own
// per-workload bucket. Turns neither spend tokens nor wait for them, so that rotation never
// stalls; nor do preemptions by another ClusterQueue (reclaim, fair sharing), so that no budget
// holds back a lender's nominal quota.

// Budget is a token bucket's shape: Burst tokens, refilled at Max per Period.
type Budget struct {
	Max    int32
	Period time.Duration
	Burst  int32
}

// Of is the bucket b declares; the zero Budget when b is nil.
func Of(b *tsapi.PreemptionBudget) Budget {
	if b == nil {
		return Budget{}
	}
	return Budget{Max: b.MaxPreemptions, Period: b.Period.Duration, Burst: b.BurstOrDefault()}
}

// PerWorkloadOf is the per-workload bucket b declares; ok false when it declares none.
func PerWorkloadOf(b *tsapi.PreemptionBudget) (Budget, bool) {
	if b == nil || b.PerWorkload == nil {
		return Budget{}, false
	}
	w := b.PerWorkload
	return Budget{Max: w.MaxPreemptions, Period: w.Period.Duration, Burst: w.MaxPreemptions}, true
}

// String is "2 per 1h", the budget as a person reads it.
func (b Budget) String() string {
	return fmt.Sprintf("%d per %s", b.Max, shortDuration(b.Period))
}

// shortDuration drops a duration's zero tails: 1h, 1h30m, 90s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Bucket is one budget with the preemptions it has paid for.
type Bucket struct {
	// Owner names the budget: "ClusterQueue team-a", "perWorkload of Cohort org", "the manager configuration".
	Owner  string
	Budget Budget
	// Spent are the instants of the preemptions it paid for, oldest first.
	Spent []time.Time
}

// tokenEpsilon absorbs the rounding of the refill arithmetic.
const tokenEpsilon = 1e-9

// rate is the refill in tokens per nanosecond.
func (b Budget) rate() float64 { return float64(b.Max) / float64(b.Period) }

// afterLast is how many tokens were left right after the last preemption paid (Burst when none):
// the bucket is full before the first one it remembers.
func (b Bucket) afterLast() float64 {
	tokens := float64(b.Budget.Burst)
	for i, at := range b.Spent {
		if i > 0 {
			tokens = min(float64(b.Budget.Burst), tokens+b.Budget.rate()*float64(at.Sub(b.Spent[i-1])))
		}
		tokens--
	}
	return tokens
}

// Tokens is how many tokens the bucket holds at now, no earlier than its last preemption.
func (b Bucket) Tokens(now time.Time) float64 {
	tokens := b.afterLast()
	if len(b.Spent) == 0 {
		return tokens
	}
	return min(float64(b.Budget.Burst), tokens+b.Budget.rate()*float64(now.Sub(b.Spent[len(b.Spent)-1])))
}

// NextToken is the first instant from which the bucket has a token; zero when it has had one
// since its last preemption (or has paid for none).
func (b Bucket) NextToken() time.Time {
	tokens := b.afterLast()
	if len(b.Spent) == 0 || tokens >= 1-tokenEpsilon {
		return time.Time{}
	}
	last := b.Spent[len(b.Spent)-1]
	wait := time.Duration((1 - tokens) / b.Budget.rate())
	// Rounded down above; the first whole nanosecond with a token.
	for b.Tokens(last.Add(wait)) < 1-tokenEpsilon {
		wait++
	}
	return last.Add(wait)
}

// Budgets are the buckets a candidate needs a token from to be preempted: its per-workload
// bucket, if any, then those on its path from its ClusterQueue up.
type Budgets struct {
	Buckets []Bucket
}

// Spent is the bucket that lacks a token at now for the longest, if any.
func (b *Budgets) Spent(now time.Time) (Bucket, bool) {
	var out Bucket
	found := false
	for _, k := range b.Buckets {
		if k.Tokens(now) >= 1-tokenEpsilon {
			continue
		}
		if !found || k.NextToken().After(out.NextToken()) {
			out, found = k, true
		}
	}
	return out, found
}

// last is the bucket that gets its token last; ok false when every bucket has one now or
// will without waiting.
func (b *Budgets) last() (Bucket, bool) {
	var out Bucket
	found := false
	for _, k := range b.Buckets {
		if next := k.NextToken(); !next.IsZero() && (!found || next.After(out.NextToken())) {
			out, found = k, true
		}
	}
	return out, found
}

// Source gives the buckets a workload holding quota needs a token from: the unit's source of
// facts (see policy.Sources).
type Source interface {
	BudgetsOf(wl *kueue.Workload) *Budgets
}

// budgets are the buckets of the candidate.
var budgets = policy.NewFact[Budgets]()

// BucketsOf are the buckets c needs a token from, if any.
func BucketsOf(c *policy.Candidate) *Budgets { return budgets.Of(c) }

// Feature is the preemption budget's gate.
const Feature policy.Feature = "PreemptionBudget"

// RuleSpent names the protection Option adds.
const RuleSpent = "PreemptionBudgetSpent"

// Unit is the preemption budget's unit (plugins.Units).
func Unit() policy.Unit {
	return policy.Unit{Feature: Feature, Option: Option, Changes: changes, Read: read,
		MayChange: func(policy.WakeSettings) bool { return true },
		Takes:     func(src any) bool { _, ok := src.(Source); return ok },
		Plugin:    Plugin{},
		Vetoed: func(rule string, in *policy.Input) (string, time.Time, bool) {
			if rule != RuleSpent {
				return "", time.Time{}, false
			}
			// Vetoed at some instant before the last token returns: the wait lasts until then.
			k, ok := budgets.Of(in.Candidate).last()
			if !ok {
				return "a preemption budget", time.Time{}, true
			}
			return SpentMessage(k), k.NextToken(), true
		},
		RefusedWhileOff: refused,
		RefusedConfig: func(c *tsconfig.Configuration) field.ErrorList {
			if c.PreemptionBudget != nil {
				return field.ErrorList{field.Forbidden(field.NewPath(tsconfig.SectionKey, "preemptionBudget"), features.BudgetGateOff)}
			}
			return nil
		},
	}
}

// SpentMessage says which budget holds a preemption back and until when.
func SpentMessage(k Bucket) string {
	return fmt.Sprintf("the preemption budget of %s (%s), spent until %s", k.Owner, k.Budget, k.NextToken().UTC().Format(time.TimeOnly))
}

// heldBack counts preemptions a spent budget held back.
var heldBack = prometheus.NewCounterVec(prometheus.CounterOpts{
	Subsystem: "kueue",
	Name:      "preemptions_held_back_total",
	Help:      "Preemptions held back by a spent preemption budget, by the preemptor's ClusterQueue; once per preemptor and wait.",
}, []string{"cluster_queue"})

// CountHeldBack counts one preemption held back for a preemptor of cq.
func CountHeldBack(cq kueue.ClusterQueueReference) {
	heldBack.WithLabelValues(string(cq)).Inc()
}

// refused refuses a budget while the gate is off, unless the stored object already had the same
// one (as the notice's settings are kept).
func refused(path *field.Path, spec, old json.RawMessage) field.ErrorList {
	b, err := tsapi.ParsePreemptionBudget(spec)
	if err != nil || b == nil {
		return nil
	}
	if old != nil {
		if o, err := tsapi.ParsePreemptionBudget(old); err == nil && o != nil && equalBudgets(b, o) {
			return nil
		}
	}
	return field.ErrorList{field.Forbidden(path.Child("preemptionBudget"), features.BudgetGateOff)}
}

func equalBudgets(a, b *tsapi.PreemptionBudget) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// read reads the buckets wl needs a token from.
func read(c *policy.Candidate, wl *kueue.Workload, r policy.Reading) {
	src, ok := policy.SourceOf[Source](r.Sources)
	if !ok {
		return
	}
	budgets.Set(c, src.BudgetsOf(wl))
}

// Option vetoes a candidate whose preemption would overdraw a bucket it needs a
// token from, unless the preemption is a turn or comes from another ClusterQueue of the cohort
// tree (a lender reclaiming its quota, or fair sharing): budgets cap what a ClusterQueue's own
// preemptions cost its workloads, and a team that spends its own budget does not make its
// borrowed work immune to the lender's reclaim.
func Option() policy.Option {
	return policy.WithProtections(policy.Rule{
		Name: RuleSpent,
		When: func(in *policy.Input) bool {
			b := budgets.Of(in.Candidate)
			if b == nil || in.Candidate.Evicted || in.Scope != policy.SameClusterQueue || in.EligibleByTurn() {
				return false
			}
			_, spent := b.Spent(in.Now)
			return spent
		},
		Why: func(in *policy.Input) string {
			k, _ := budgets.Of(in.Candidate).Spent(in.Now)
			return SpentMessage(k)
		},
	})
}

// changes gives when each bucket of c gets a token back.
func changes(c *policy.Candidate, _ policy.WakeSettings, add func(policy.Change)) {
	b := budgets.Of(c)
	if b == nil || c.Evicted {
		return
	}
	for _, k := range b.Buckets {
		add(policy.Change{At: k.NextToken()})
	}
}
