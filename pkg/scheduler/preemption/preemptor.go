// Package preemption finds the admitted workloads to evict so that a pending one fits, for
// classical preemption (within a ClusterQueue, reclaim in the cohort tree, borrowWithinCohort)
// and for fair sharing. Which candidates are eligible, and in which order they are tried, is
// asked of the victim policy (package policy); this package only does the search over quota. The
// search mirrors upstream's (preemption.go, fair_sharing_log.go and package classical), and the
// victim policy enters it at the calls marked "// timeshare:" (seams.go).
//
// Targets are upstream's preemption.Target. Evictions for upstream's reasons are issued by
// upstream's exported code, so events, conditions and metrics look exactly as with upstream Kueue;
// evictions for our reasons are issued the same way by this package, with the preemption reason
// on the Evicted condition too (see issue).
package preemption

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	upstream "sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	"sigs.k8s.io/kueue/pkg/util/expectations"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	"sigs.k8s.io/kueue/pkg/workload"

	tsfeatures "github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	tsmetrics "github.com/kueue-timeshare/kueue-timeshare/pkg/metrics"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Target is a workload chosen for eviction, with the reason recorded on it.
type Target = upstream.Target

// timestampBuffer is upstream's SchedulerTimestampPreemptionBuffer window.
const timestampBuffer = 5 * time.Minute

// Preemptor chooses preemption targets with the victim policy and issues the evictions.
type Preemptor struct {
	clock             clock.Clock
	workloadOrdering  workload.Ordering
	enableFairSharing bool
	fsStrategies      []fairsharing.Strategy
	// enabledAfs: admission fair sharing is on (its LocalQueue usage orders candidates).
	enabledAfs bool
	policy     *policy.Policy
	// pending lists a ClusterQueue's pending workloads, to decide whose turn it is.
	pending func(kueue.ClusterQueueReference) []*workload.Info
	// pendingCycle keeps what pending returned during the current scheduling cycle.
	pendingCycle pendingCycle
	// settingsKnown, when set, reports whether a ClusterQueue's settings have been read; no
	// workload of a ClusterQueue whose settings are not is preempted, nor preempts.
	settingsKnown func(kueue.ClusterQueueReference) bool
	// cohortKnown is settingsKnown for the Cohorts above a ClusterQueue, whose min-runtimes it
	// inherits.
	cohortKnown func(kueue.CohortReference) bool
	// features are the victim policy's features turned on (each still behind its gate), and
	// sources what their units read facts from.
	features []policy.Feature
	sources  policy.Sources
	// plugins are the features' parts in the preemptor (hooks.go); units the policy's table.
	plugins []Plugin
	// judges are the plugins that see each decision of a search (policy.JudgeObserver), at most
	// 64, whether their feature is on or not.
	judges []judge
	units  policy.Table
	// index, when set, lists the workloads that a unit may have marked.
	index *WorkloadIndex
	// runtimeClock says from which condition min-runtimes and expected runtimes count.
	runtimeClock policy.RuntimeClock
	client       client.Client
	// issuer evicts targets preempted for upstream's reasons exactly as upstream does (conditions,
	// events, metrics, expectations).
	issuer *upstream.Preemptor
	// What evicting targets preempted for our reasons needs, the same as issuer has.
	recorder     events.EventRecorder
	tracker      *roletracker.RoleTracker
	expectations *expectations.Store
	customLabels *metrics.CustomLabels
	// decisions makes our counters count decisions, not searches.
	decisions *tsmetrics.Decisions
	// refusals backs off preemptions the API server refused.
	refusals *refusals
}

// Option configures a Preemptor beyond upstream's arguments.
type Option func(*config)

type config struct {
	// features are the victim policy's features turned on, added in the order of its precedence
	// table (plugins.Precedence) whatever the order of the options; policyOpts come after them.
	features      []policy.Feature
	policyOpts    []policy.Option
	pending       func(kueue.ClusterQueueReference) []*workload.Info
	settingsKnown func(kueue.ClusterQueueReference) bool
	cohortKnown   func(kueue.CohortReference) bool
	sources       policy.Sources
	index         *WorkloadIndex
	runtimeClock  policy.RuntimeClock
	// given are the sources given to WithSources; plugins the preemptor's (those of units unless
	// pluginsSet).
	given      []any
	plugins    []Plugin
	pluginsSet bool
	// units is the victim policy's table (allUnits unless unitsSet).
	units    policy.Table
	unitsSet bool
}

// WithRuntimeClock makes min-runtimes and expected runtimes count from clock's condition
// (Admitted by default).
func WithRuntimeClock(clock policy.RuntimeClock) Option {
	return func(c *config) { c.runtimeClock = clock }
}

// WithPendingWorkloads gives the preemptor each ClusterQueue's pending workloads, so that time-based
// preemption takes turns. Without it every pending workload
// may take a turn.
func WithPendingWorkloads(pending func(kueue.ClusterQueueReference) []*workload.Info) Option {
	return func(c *config) { c.pending = pending }
}

// WithSettingsKnown makes the preemptor leave alone, as preemptor and as victims, the workloads of
// a ClusterQueue whose kueue-timeshare settings known does not report read yet: a ClusterQueue
// just created may reach the scheduler before its min-runtimes reach the preemptor.
func WithSettingsKnown(known func(kueue.ClusterQueueReference) bool) Option {
	return func(c *config) { c.settingsKnown = known }
}

// WithCohortSettingsKnown is WithSettingsKnown for Cohorts: a ClusterQueue below a Cohort whose
// settings known does not report read yet is left alone in the same way.
func WithCohortSettingsKnown(known func(kueue.CohortReference) bool) Option {
	return func(c *config) { c.cohortKnown = known }
}

// WithPolicy extends the victim policy.
func WithPolicy(opts ...policy.Option) Option {
	return func(c *config) { c.policyOpts = append(c.policyOpts, opts...) }
}

// allUnits are the victim policy's features, in precedence order.
var allUnits = plugins.Units()

// WithSources turns on every feature of the victim policy that one of src feeds (its unit's
// Takes), each still behind its gate: the one registration of the features, by their sources.
// The sources are read once all options are applied, so that WithUnits may come after.
func WithSources(src ...any) Option {
	return func(c *config) { c.given = append(c.given, src...) }
}

// WithUnits replaces the victim policy's table (plugins.Units by default): a feature whose unit is
// left out cannot be turned on, and has no plugin unless WithPlugins gives one.
func WithUnits(t policy.Table) Option {
	return func(c *config) { c.units = slices.Clone(t); c.unitsSet = true }
}

// WithPlugins replaces the preemptor's plugins (by default those of the table's units): a
// feature whose plugin is left out keeps only its unit's rules.
func WithPlugins(plugins ...Plugin) Option {
	return func(c *config) { c.plugins = slices.Clone(plugins); c.pluginsSet = true }
}

// WithoutFeature builds the preemptor without feature f: neither its unit nor its plugin.
func WithoutFeature(f policy.Feature) Option {
	return WithUnits(allUnits.Without(f))
}

// takeSources turns on the features that the sources given to WithSources feed.
func (c *config) takeSources() {
	for _, s := range c.given {
		taken := false
		for _, u := range c.units {
			if u.Takes != nil && u.Takes(s) {
				c.features = append(c.features, u.Feature)
				taken = true
			}
		}
		if taken {
			c.sources = append(c.sources, s)
		}
	}
}

// on reports whether feature f is turned on and its gate is on.
func (p *Preemptor) on(f policy.Feature) bool {
	return slices.Contains(p.features, f) && policy.GateOn(f)
}

// unitsOn are the units of the features that are on.
func (p *Preemptor) unitsOn() policy.Table {
	var out policy.Table
	for _, u := range p.units {
		if p.on(u.Feature) {
			out = append(out, u)
		}
	}
	return out
}

// New takes the same arguments as upstream's preemption.New, plus options that extend the
// victim policy with this project's features.
func New(
	cl client.Client,
	ordering workload.Ordering,
	recorder events.EventRecorder,
	fs *configapi.FairSharing,
	admissionFairSharing bool,
	clk clock.Clock,
	tracker *roletracker.RoleTracker,
	store *expectations.Store,
	customLabels *metrics.CustomLabels,
	opts ...Option,
) *Preemptor {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if !c.unitsSet {
		c.units = allUnits
	}
	if !c.pluginsSet {
		c.plugins = pluginsOf(c.units)
	}
	c.takeSources()
	// A feature left out of the table stays off, whatever option turned it on.
	inTable := c.units.Features()
	c.features = slices.DeleteFunc(c.features, func(f policy.Feature) bool { return !slices.Contains(inTable, f) })
	po := policy.Options{LocalQueueFairSharing: admissionFairSharing}
	if features.Enabled(features.SchedulerTimestampPreemptionBuffer) {
		po.TimestampBuffer = timestampBuffer
	}
	policyOpts := c.policyOpts
	if len(c.features) > 0 {
		policyOpts = append([]policy.Option{c.units.With(c.features...)}, policyOpts...)
	}
	p := &Preemptor{
		clock:             clk,
		workloadOrdering:  ordering,
		enableFairSharing: fairsharing.Enabled(fs),
		fsStrategies:      parseStrategies(fs),
		enabledAfs:        admissionFairSharing,
		policy:            policy.New(po, policyOpts...),
		pending:           c.pending,
		settingsKnown:     c.settingsKnown,
		cohortKnown:       c.cohortKnown,
		features:          c.features,
		sources:           c.sources,
		plugins:           c.plugins,
		units:             c.units,
		index:             c.index,
		runtimeClock:      c.runtimeClock,
		client:            cl,
		issuer:            upstream.New(cl, ordering, recorder, fs, admissionFairSharing, clk, tracker, store, customLabels),
		recorder:          recorder,
		tracker:           tracker,
		expectations:      store,
		customLabels:      customLabels,
		decisions:         tsmetrics.NewDecisions(),
		refusals:          newRefusals(),
	}
	for _, pl := range p.plugins {
		if o, ok := pl.(policy.JudgeObserver); ok && len(p.judges) < 64 {
			p.judges = append(p.judges, judge{feature: pl.Feature(), JudgeObserver: o})
		}
	}
	return p
}

// search is the victim policy's side of one preemption problem (upstream's preemptionCtx, which
// it embeds): the search edits the snapshot and always restores it.
type search struct {
	preemptionCtx
	p         *Preemptor
	now       time.Time
	preemptor *policy.Pending
	info      *workload.Info
	cq        *schdcache.ClusterQueueSnapshot
	// own is what the units resolved about the preemptor's ClusterQueue, for the ordering.
	own policy.QueueFacts
	// question is reused for every policy call: one allocation per search, not per workload.
	question policy.Input
	// resolved are the queue facts resolved so far, by victim ClusterQueue; preemptorParents the
	// Cohorts above the preemptor's ClusterQueue, read at the first.
	resolved         map[kueue.ClusterQueueReference]policy.QueueFacts
	preemptorParents []kueue.CohortReference
	// protected counts candidates skipped because of a protection.
	protected protectedTally
	// judgesOn has bit i set when the preemptor's judges[i] is on, and judgesRead says it was
	// read, at the search's first decision: no allocation per search.
	judgesOn   uint64
	judgesRead bool
	// judgeHandle is what the judges get, kept here so that lending it allocates nothing.
	judgeHandle handle
	// scratch holds the workload being judged, so that refused ones cost no allocation.
	scratch candidate
	// judging is the ClusterQueue whose workloads are being judged.
	judging judging
	// order is the victim policy's ordering context, made at the first comparison.
	order *policy.OrderContext
	// fair are the fair-sharing search's candidates; reasons the preemption reasons the policy
	// gave them, if any.
	fair    []*candidate
	reasons map[*workload.Info]string
	// byShare are the targets a fair-sharing strategy allowed; keep those fillBackWorkloads
	// must not put back.
	byShare map[*workload.Info]bool
	keep    map[*workload.Info]bool
}

// newSearch sets up a search for wl on snapshot: what the GetTargets, the oracle and Wait share.
func (p *Preemptor) newSearch(ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot, contested sets.Set[resources.FlavorResource], usage workload.Usage) *search {
	return p.newSearchFor(ctx, wl, snapshot, contested, usage, true)
}

// newSearchFor is newSearch; without turns the workload searches as if it had the turn.
func (p *Preemptor) newSearchFor(ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot, contested sets.Set[resources.FlavorResource], usage workload.Usage, turns bool) *search {
	log := ctrllog.FromContext(ctx)
	cq := snapshot.ClusterQueue(wl.ClusterQueue)
	s := &search{
		preemptionCtx: preemptionCtx{
			ctx:               ctx,
			clock:             p.clock,
			log:               log,
			preemptor:         *wl,
			preemptorCQ:       cq,
			snapshot:          snapshot,
			workloadUsage:     usage,
			frsNeedPreemption: contested,
		},
		p:         p,
		now:       p.clock.Now(),
		preemptor: policy.NewPending(log, wl, p.workloadOrdering),
		info:      wl,
		cq:        cq,
	}
	s.search = s
	p.applyTurns(s, turns)
	return s
}

// GetTargets returns the workloads to evict so that wl fits with the given assignment, or nil.
func (p *Preemptor) GetTargets(ctx context.Context, wl workload.Info, assignment flavorassigner.Assignment, snapshot *schdcache.Snapshot) []*Target {
	log := ctrllog.FromContext(ctx)
	if unread := p.unread(snapshot.ClusterQueue(wl.ClusterQueue), wl.ClusterQueue); unread != "" {
		log.V(3).Info("No preemption until kueue-timeshare settings are read", "clusterQueue", wl.ClusterQueue, "unread", unread)
		return nil
	}
	for w := range pluginsOn[policy.Waiter](p) {
		if targets, held := w.WaitTargets(ctx, p.handleAt(ctx), &wl, snapshot); held {
			return targets
		}
	}
	s := p.newSearch(ctx, &wl, snapshot, flavorResourcesNeedPreemption(assignment),
		workload.Usage{Quota: assignment.TotalRequestsFor(log, &wl), TAS: wl.TASUsage()})
	if features.Enabled(features.TopologyAwareScheduling) {
		s.tasRequests = assignment.WorkloadsTopologyRequests(log, &wl, s.cq)
	}
	targets := p.targets(s)
	role := roletracker.GetRole(p.tracker)
	s.protected.report(p.decisions, wl.Obj.UID, wl.ClusterQueue, role, p.customLabels, s.now)
	for o := range pluginsOn[policy.SearchObserver](p) {
		o.AfterSearch(handle{p, s.now, log}, policy.Search{Preemptor: s.info, ClusterQueue: s.cq.Name, Victims: len(targets), VetoEnds: s.protected.unitEnds})
	}
	return targets
}

// unread names the first of ClusterQueue name (cq in the snapshot, if there) and the Cohorts above
// it whose settings are not read yet, as "ClusterQueue x" or "Cohort y"; "" when all are read,
// nobody tracks that, or the gates that read them are off (then the settings cannot change the
// outcome, and waiting for them would only delay preemptions that upstream makes at once).
func (p *Preemptor) unread(cq *schdcache.ClusterQueueSnapshot, name kueue.ClusterQueueReference) string {
	// A ClusterQueue carries minAdmitDuration and the units' settings; a Cohort only the settings
	// that come down the tree, which matter here to the units that resolve them for a search
	// (min-runtimes).
	protection := p.unitsOn().Inherits()
	if !protection && !tsfeatures.Enabled(tsfeatures.TimeBasedSamePriorityPreemption) {
		return ""
	}
	if p.settingsKnown != nil && !p.settingsKnown(name) {
		return "ClusterQueue " + string(name)
	}
	if !protection || p.cohortKnown == nil || cq == nil || !cq.HasParent() {
		return ""
	}
	for c := cq.Parent(); ; c = c.Parent() {
		if !p.cohortKnown(c.Name) {
			return "Cohort " + string(c.Name)
		}
		if !c.HasParent() {
			return ""
		}
	}
}

// IssuePreemptions evicts the targets; see upstream's Preemptor.IssuePreemptions and issue.
func (p *Preemptor) IssuePreemptions(ctx context.Context, cache *schdcache.Cache, preemptor *workload.Info, targets []*Target, snap *schdcache.ClusterQueueSnapshot) (int, int, error) {
	return p.issue(ctx, cache, preemptor, targets, snap)
}

// SatisfyPreemptionExpectation records that an eviction issued earlier has been observed.
func (p *Preemptor) SatisfyPreemptionExpectation(log logr.Logger, wl *kueue.Workload) {
	p.issuer.SatisfyPreemptionExpectation(log, wl)
}

// decide asks the victim policy about one candidate and logs refusals at high verbosity.
func (p *Preemptor) decide(s *search, c *policy.Candidate, scope policy.Scope, pol kueue.PreemptionPolicy, q *policy.QueueFacts) policy.Decision {
	s.question = policy.Input{Preemptor: s.preemptor, Candidate: c, Scope: scope, Policy: pol, Queue: q, Now: s.now}
	if logV := s.log.V(6); logV.Enabled() {
		d := p.policy.Explain(&s.question)
		logV.Info("Victim policy decision", "candidate", klog.KObj(c.Info.Obj), "eligible", d.Eligible, "rule", d.Rule, "message", d.Message)
		return d
	}
	return p.policy.Decide(&s.question)
}

// candidate is an eligible workload with the preemption reason the policy gave, if any.
type candidate struct {
	policy.Candidate
	reason string
}
