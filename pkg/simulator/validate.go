package simulator

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuewebhooks "sigs.k8s.io/kueue/pkg/webhooks"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsfeatures "github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/toleration"
)

// DefaultNamespace is where LocalQueues and workloads live unless the scenario says otherwise.
const DefaultNamespace = "default"

// DefaultStart is when simulations start unless simulation.start says otherwise.
var DefaultStart = time.Date(2026, time.January, 5, 9, 0, 0, 0, time.UTC)

// DefaultSchedulingInterval is simulation.schedulingInterval's default.
const DefaultSchedulingInterval = time.Second

// ourGates are the feature gates a scenario may set.
var ourGates = []string{
	string(tsfeatures.TimeBasedSamePriorityPreemption),
	string(tsfeatures.MinRuntimeProtection),
	string(tsfeatures.PreemptionToleration),
	string(tsfeatures.ExpectedRuntimeRequeue),
	string(tsfeatures.PreemptionNotice),
}

// WorkloadSpec is one workload of a scenario, with copies expanded and its queue resolved.
type WorkloadSpec struct {
	Name         string
	Namespace    string
	LocalQueue   string
	ClusterQueue string
	// Arrival is when it is submitted, from the start.
	Arrival time.Duration
	// Duration is the run time it needs to finish.
	Duration     time.Duration
	Checkpointed bool
	// CheckpointInterval is the run time between checkpoints, each taking CheckpointDuration; 0:
	// none (a job that is not Checkpointed then loses all its run time at each eviction).
	CheckpointInterval time.Duration
	CheckpointDuration time.Duration
	Pods               int32
	// Requests is what each pod asks for.
	Requests corev1.ResourceList
	// PriorityClass and PriorityKind name its class ("" for none); Priority is the class's value.
	PriorityClass string
	PriorityKind  kueue.PriorityClassKind
	Priority      int32
	Annotations   map[string]string
	// Snapshot is its state at the start, for a workload already in the cluster then.
	Snapshot *WorkloadSnapshot
	// path is where it is declared, for messages.
	path string
}

// validate checks what decoding cannot: references, ranges, and the rules the API server and the
// webhooks (upstream's and ours) would apply to the objects the scenario stands for.
func (s *Scenario) validate(d *decoder) ErrorList {
	v := &validator{d: d, s: s}
	v.simulation()
	v.gates()
	v.timeshare()
	v.fairSharing()
	flavors := v.flavors()
	cohorts := v.cohorts(flavors)
	cqs := v.clusterQueues(flavors, cohorts)
	v.localQueues(cqs)
	classes := v.priorityClasses()
	if len(d.errs) == 0 {
		// References are sound: the API objects can be built and checked as the API would.
		v.apiChecks()
	}
	if len(d.errs) == 0 {
		v.workloads(classes)
	}
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
	return d.errs
}

type validator struct {
	d *decoder
	s *Scenario
}

func (v *validator) errorf(path, format string, args ...any) { v.d.errorf(path, format, args...) }

func (v *validator) required(path, value string) bool {
	if value == "" {
		v.errorf(path, "required")
		return false
	}
	return true
}

// name checks an object name as the API server would (a DNS subdomain, or label when label).
func (v *validator) name(path, value string, label bool) bool {
	if !v.required(path, value) {
		return false
	}
	var problems []string
	if label {
		problems = validation.IsDNS1123Label(value)
	} else {
		problems = validation.IsDNS1123Subdomain(value)
	}
	if len(problems) > 0 {
		v.errorf(path, "%q is not a valid name: %s", value, strings.Join(problems, "; "))
		return false
	}
	return true
}

func (v *validator) oneOf(path, value string, allowed ...string) {
	if value != "" && !slices.Contains(allowed, value) {
		v.errorf(path, "%q is not supported; use one of %s", value, strings.Join(allowed, ", "))
	}
}

func (v *validator) positive(path string, d *Duration) {
	if d != nil && d.Duration <= 0 {
		v.errorf(path, "must be positive, not %s", d.Duration)
	}
}

func (v *validator) nonNegative(path string, d *Duration) {
	if d != nil && d.Duration < 0 {
		v.errorf(path, "must not be negative, not %s", d.Duration)
	}
}

func (v *validator) simulation() {
	v.positive("simulation.until", v.s.Simulation.Until)
	if i := v.s.Simulation.SchedulingInterval; i != nil && i.Duration < time.Millisecond {
		v.errorf("simulation.schedulingInterval", "must be at least 1ms, not %s", i.Duration)
	}
}

// ScenarioGates are the feature gates a scenario may set: ours, and Kueue's whose default the
// manager changes.
func ScenarioGates() []string {
	return append(slices.Clone(ourGates), sortedKeys(tsfeatures.KueueDefaults)...)
}

func (v *validator) gates() {
	allowed := ScenarioGates()
	for _, name := range sortedKeys(v.s.FeatureGates) {
		if !slices.Contains(allowed, name) {
			v.errorf(key("featureGates", name), "not a feature gate a scenario may set; use one of %s", strings.Join(allowed, ", "))
		}
	}
}

func (v *validator) timeshare() {
	for _, e := range tsconfig.Validate(v.s.timeshareConfig()) {
		// The configuration's paths start with "timeshare", as the scenario's do.
		v.errorf(e.Field, "%s", strings.TrimPrefix(e.ErrorBody(), "Invalid value: "))
	}
}

func (v *validator) fairSharing() {
	if v.s.FairSharing == nil {
		return
	}
	for i, st := range v.s.FairSharing.PreemptionStrategies {
		v.oneOf(index("fairSharing.preemptionStrategies", i), st, string(configapi.LessThanOrEqualToFinalShare), string(configapi.LessThanInitialShare))
	}
}

func (v *validator) flavors() sets.Set[string] {
	names := sets.New[string]()
	if len(v.s.Flavors) == 0 {
		v.errorf("flavors", "at least one flavor is required")
	}
	for i, f := range v.s.Flavors {
		p := index("flavors", i)
		if !v.name(child(p, "name"), f.Name, false) {
			continue
		}
		if names.Has(f.Name) {
			v.errorf(child(p, "name"), "flavor %q is declared twice", f.Name)
		}
		names.Insert(f.Name)
	}
	return names
}

func (v *validator) quota(path string, quota []FlavorQuota, flavors sets.Set[string], required bool) {
	if len(quota) == 0 {
		if required {
			v.errorf(path, "at least one flavor with quota is required")
		}
		return
	}
	seen := sets.New[string]()
	groupOf := map[string]string{} // resource -> the resources of its group, as a key
	for i, fq := range quota {
		p := index(path, i)
		if v.required(child(p, "flavor"), fq.Flavor) {
			if !flavors.Has(fq.Flavor) {
				v.errorf(child(p, "flavor"), "flavor %q is not declared under flavors", fq.Flavor)
			}
			if seen.Has(fq.Flavor) {
				v.errorf(child(p, "flavor"), "flavor %q is listed twice", fq.Flavor)
			}
			seen.Insert(fq.Flavor)
		}
		if len(fq.Resources) == 0 {
			v.errorf(child(p, "resources"), "at least one resource is required")
			continue
		}
		names := sortedKeys(fq.Resources)
		group := strings.Join(names, ",")
		for _, r := range names {
			rp := key(child(p, "resources"), r)
			if problems := validation.IsQualifiedName(r); len(problems) > 0 {
				v.errorf(rp, "%q is not a valid resource name: %s", r, strings.Join(problems, "; "))
			}
			if other, ok := groupOf[r]; ok && other != group {
				v.errorf(rp, "flavors that share a resource must list the same resources (%s here, %s in an earlier flavor)", group, other)
			}
			groupOf[r] = group
			q := fq.Resources[r]
			if q.Nominal.Sign() < 0 {
				v.errorf(child(rp, "nominal"), "must not be negative")
			}
		}
	}
}

func (v *validator) cohorts(flavors sets.Set[string]) map[string]int {
	index := map[string]int{}
	for i, c := range v.s.Cohorts {
		p := fmt.Sprintf("cohorts[%d]", i)
		if !v.name(child(p, "name"), c.Name, false) {
			continue
		}
		if _, dup := index[c.Name]; dup {
			v.errorf(child(p, "name"), "cohort %q is declared twice", c.Name)
		}
		index[c.Name] = i
		if c.Parent != "" {
			v.name(child(p, "parent"), c.Parent, false)
		}
		v.quota(child(p, "quota"), c.Quota, flavors, false)
		if c.Preemption != nil {
			v.nonNegative(child(p, "preemption.preemptMinRuntime"), c.Preemption.PreemptMinRuntime)
			v.nonNegative(child(p, "preemption.reclaimMinRuntime"), c.Preemption.ReclaimMinRuntime)
		}
	}
	// A parent chain must end: Kueue leaves a cycle's queues unable to admit anything.
	for i, c := range v.s.Cohorts {
		seen := sets.New(c.Name)
		for at := c.Parent; at != ""; {
			if seen.Has(at) {
				v.errorf(fmt.Sprintf("cohorts[%d].parent", i), "cohort %q is its own ancestor (the parents form a cycle)", c.Name)
				break
			}
			seen.Insert(at)
			j, ok := index[at]
			if !ok {
				break
			}
			at = v.s.Cohorts[j].Parent
		}
	}
	return index
}

func (v *validator) clusterQueues(flavors sets.Set[string], _ map[string]int) map[string]int {
	index := map[string]int{}
	if len(v.s.ClusterQueues) == 0 {
		v.errorf("clusterQueues", "at least one ClusterQueue is required")
	}
	for i, cq := range v.s.ClusterQueues {
		p := fmt.Sprintf("clusterQueues[%d]", i)
		if !v.name(child(p, "name"), cq.Name, false) {
			continue
		}
		if _, dup := index[cq.Name]; dup {
			v.errorf(child(p, "name"), "ClusterQueue %q is declared twice", cq.Name)
		}
		index[cq.Name] = i
		if cq.Cohort != "" {
			v.name(child(p, "cohort"), cq.Cohort, false)
		}
		v.oneOf(child(p, "queueingStrategy"), cq.QueueingStrategy, string(kueue.BestEffortFIFO), string(kueue.StrictFIFO))
		v.quota(child(p, "quota"), cq.Quota, flavors, true)
		if pr := cq.Preemption; pr != nil {
			policies := []string{string(kueue.PreemptionPolicyNever), string(kueue.PreemptionPolicyLowerPriority), string(kueue.PreemptionPolicyLowerOrNewerEqualPriority)}
			v.oneOf(child(p, "preemption.withinClusterQueue"), pr.WithinClusterQueue, policies...)
			v.oneOf(child(p, "preemption.reclaimWithinCohort"), pr.ReclaimWithinCohort, append(policies, string(kueue.PreemptionPolicyAny))...)
			if b := pr.BorrowWithinCohort; b != nil {
				v.oneOf(child(p, "preemption.borrowWithinCohort.policy"), b.Policy, string(kueue.BorrowWithinCohortPolicyNever), string(kueue.BorrowWithinCohortPolicyLowerPriority))
			}
		}
	}
	return index
}

func (v *validator) localQueues(cqs map[string]int) {
	seen := map[string]int{}
	for i, lq := range v.s.LocalQueues {
		p := fmt.Sprintf("localQueues[%d]", i)
		v.name(child(p, "name"), lq.Name, false)
		if lq.Namespace != "" {
			v.name(child(p, "namespace"), lq.Namespace, true)
		}
		k := lq.namespace() + "/" + lq.Name
		if _, dup := seen[k]; dup {
			v.errorf(child(p, "name"), "LocalQueue %s is declared twice", k)
		}
		seen[k] = i
		if v.required(child(p, "clusterQueue"), lq.ClusterQueue) {
			if _, ok := cqs[lq.ClusterQueue]; !ok {
				v.errorf(child(p, "clusterQueue"), "ClusterQueue %q is not declared under clusterQueues", lq.ClusterQueue)
			}
		}
	}
}

func (v *validator) priorityClasses() map[string]int {
	index := map[string]int{}
	store := toleration.NewStore()
	for i, pc := range v.s.PriorityClasses {
		p := fmt.Sprintf("priorityClasses[%d]", i)
		if !v.name(child(p, "name"), pc.Name, false) {
			continue
		}
		if _, dup := index[pc.Name]; dup {
			v.errorf(child(p, "name"), "priority class %q is declared twice (a scenario gives each name one kind)", pc.Name)
		}
		index[pc.Name] = i
		v.oneOf(child(p, "kind"), pc.Kind, string(kueue.WorkloadPriorityClassKind), string(kueue.PodPriorityClassKind))
		if err := store.Set(pc.kind(), pc.Name, pc.Annotations, pc.Value); err != nil {
			v.apiErrors(p, "metadata.", err)
		}
	}
	return index
}

// apiChecks builds the API objects and runs the checks the API server and the webhooks would.
func (v *validator) apiChecks() {
	objs, err := v.s.Objects()
	if err != nil {
		v.errorf("", "%v", err)
		return
	}
	store := queuesettings.NewStore(policy.Defaults{}, policy.ResolveLCA)
	for i, u := range objs.ClusterQueues {
		p := fmt.Sprintf("clusterQueues[%d]", i)
		typed, err := typedClusterQueue(u)
		if err != nil {
			v.errorf(p, "%v", err)
			continue
		}
		for _, e := range kueuewebhooks.ValidateClusterQueue(typed) {
			v.errorf(scenarioPath(p, e.Field), "%s", e.ErrorBody())
		}
		if err := store.SetClusterQueue(u); err != nil {
			v.apiErrors(p, "spec.", err)
		}
	}
	for i, u := range objs.Cohorts {
		if err := store.SetCohort(u); err != nil {
			v.apiErrors(fmt.Sprintf("cohorts[%d]", i), "spec.", err)
		}
	}
}

// apiErrors reports an error that lists API field errors ("spec.preemption.x: Invalid value: ...")
// at the scenario fields they come from.
func (v *validator) apiErrors(path, prefix string, err error) {
	for _, line := range splitAggregate(err.Error(), prefix) {
		field, body, ok := strings.Cut(line, ": ")
		if !ok || !strings.HasPrefix(field, prefix) {
			v.errorf(path, "%s", line)
			continue
		}
		v.errorf(scenarioPath(path, field), "%s", body)
	}
}

// splitAggregate splits the text of a field.ErrorList aggregate ("[a, b]" for several errors, the
// error itself for one) into its errors, each starting with prefix.
func splitAggregate(s, prefix string) []string {
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return []string{s}
	}
	s = s[1 : len(s)-1]
	var out []string
	for {
		i := strings.Index(s, ", "+prefix)
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+2:]
	}
}

// scenarioPath translates an API field path of an object built from the scenario element at base
// into the scenario's own path, as closely as the two correspond.
func scenarioPath(base, apiField string) string {
	replacements := []struct{ api, scenario string }{
		{"spec.preemption.", "preemption."},
		{"spec.resourceGroups", "quota"},
		{"spec.cohortName", "cohort"},
		{"spec.parentName", "parent"},
		{"spec.queueingStrategy", "queueingStrategy"},
		{"spec.fairSharing", "fairSharing"},
		{"metadata.annotations", "annotations"},
	}
	for _, r := range replacements {
		if rest, ok := strings.CutPrefix(apiField, r.api); ok {
			if r.api == "spec.resourceGroups" {
				return child(base, r.scenario)
			}
			return child(base, r.scenario+rest)
		}
	}
	return base
}

// MaxWorkloads bounds the workloads of a scenario, copies included.
const MaxWorkloads = 100000

func (v *validator) workloads(classes map[string]int) {
	if len(v.s.Workloads) == 0 {
		v.errorf("workloads", "at least one workload is required")
	}
	total := 0
	for i, w := range v.s.Workloads {
		total += min(max(w.Copies, 1), MaxWorkloads+1)
		if total > MaxWorkloads {
			v.errorf(child(fmt.Sprintf("workloads[%d]", i), "copies"), "the scenario would have %d workloads; the simulator takes at most %d",
				total+max(w.Copies, 1)-min(max(w.Copies, 1), MaxWorkloads+1), MaxWorkloads)
			return
		}
	}
	for i, w := range v.s.Workloads {
		p := fmt.Sprintf("workloads[%d]", i)
		v.name(child(p, "name"), w.Name, false)
		if w.Arrival.Duration < 0 {
			v.errorf(child(p, "arrival"), "must not be negative, not %s", w.Arrival.Duration)
		}
		if _, set := v.d.lines[child(p, "duration")]; !set {
			v.errorf(child(p, "duration"), "required: the run time the workload needs to finish")
		} else if w.Duration.Duration <= 0 {
			v.errorf(child(p, "duration"), "must be positive, not %s", w.Duration.Duration)
		}
		if _, set := v.d.lines[child(p, "pods")]; set && w.Pods < 1 {
			v.errorf(child(p, "pods"), "must be at least 1, not %d", w.Pods)
		}
		if _, set := v.d.lines[child(p, "copies")]; set && w.Copies < 1 {
			v.errorf(child(p, "copies"), "must be at least 1, not %d", w.Copies)
		}
		v.nonNegative(child(p, "every"), w.Every)
		if w.Every != nil && w.Copies <= 1 {
			v.errorf(child(p, "every"), "only applies with copies greater than 1")
		}
		v.checkpoints(p, w)
		v.workloadQueue(p, w)
		v.snapshot(p, w)
		if w.PriorityClass != "" {
			if _, ok := classes[w.PriorityClass]; !ok {
				v.errorf(child(p, "priorityClass"), "priority class %q is not declared under priorityClasses", w.PriorityClass)
			}
		}
		if len(w.Resources) == 0 {
			v.errorf(child(p, "resources"), "required: what each pod asks for, like {cpu: 1}")
		}
		for _, r := range sortedKeys(w.Resources) {
			if q := w.Resources[r]; q.Sign() <= 0 {
				v.errorf(key(child(p, "resources"), r), "must be positive")
			}
		}
		if er, ok := annotations.ParseExpectedRuntime(w.Annotations); ok && er.Problem != "" {
			name, _, _ := strings.Cut(strings.TrimPrefix(er.Problem, "annotation "), ":")
			v.errorf(key(child(p, "annotations"), name), "%s", er.Problem)
		}
		for _, a := range []string{annotations.PreemptionNotice, annotations.PreemptionDeadline} {
			if _, ok := w.Annotations[a]; ok {
				v.errorf(key(child(p, "annotations"), a), "written by the manager when it gives a notice, not by a scenario")
			}
		}
	}
	if len(v.d.errs) > 0 {
		return
	}
	specs, _ := v.s.expand()
	seen := map[string]string{}
	for _, w := range specs {
		k := w.Namespace + "/" + w.Name
		if first, dup := seen[k]; dup {
			v.errorf(child(w.path, "name"), "workload %s is declared twice (first at %s)", k, first)
			continue
		}
		seen[k] = w.path
		v.coveredResources(w)
		v.snapshotFlavors(w)
	}
}

func (v *validator) workloadQueue(p string, w Workload) {
	switch {
	case w.Queue != "" && w.ClusterQueue != "":
		v.errorf(child(p, "clusterQueue"), "set either queue (a LocalQueue) or clusterQueue, not both")
	case w.Queue == "" && w.ClusterQueue == "":
		v.errorf(child(p, "queue"), "required: a LocalQueue name (queue) or a ClusterQueue name (clusterQueue)")
	case w.ClusterQueue != "":
		if w.Namespace != "" {
			v.errorf(child(p, "namespace"), "only applies with queue; with clusterQueue the namespace is that of a LocalQueue of the ClusterQueue")
		}
		if v.s.clusterQueue(w.ClusterQueue) == nil {
			v.errorf(child(p, "clusterQueue"), "ClusterQueue %q is not declared under clusterQueues", w.ClusterQueue)
		}
	default:
		matches := v.s.localQueuesNamed(w.Queue, w.Namespace)
		switch {
		case len(matches) == 0 && w.Namespace != "":
			v.errorf(child(p, "queue"), "no LocalQueue %s/%s (declare it under localQueues)", w.Namespace, w.Queue)
		case len(matches) == 0:
			v.errorf(child(p, "queue"), "no LocalQueue %q (declare it under localQueues)", w.Queue)
		case len(matches) > 1:
			v.errorf(child(p, "namespace"), "LocalQueue %q exists in several namespaces; say which", w.Queue)
		}
	}
}

// coveredResources: a resource the ClusterQueue has no quota for makes the workload wait forever.
func (v *validator) coveredResources(w WorkloadSpec) {
	cq := v.s.clusterQueue(w.ClusterQueue)
	covered := sets.New[string]()
	for _, fq := range cq.Quota {
		for r := range fq.Resources {
			covered.Insert(r)
		}
	}
	for _, r := range sortedKeys(w.Requests) {
		if !covered.Has(string(r)) {
			v.errorf(key(child(w.path, "resources"), string(r)), "ClusterQueue %s has no quota for %s, so the workload could never be admitted", cq.Name, r)
		}
	}
}

func sortedKeys[V any, K ~string](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (lq LocalQueue) namespace() string {
	if lq.Namespace == "" {
		return DefaultNamespace
	}
	return lq.Namespace
}

func (pc PriorityClass) kind() kueue.PriorityClassKind {
	if pc.Kind == "" {
		return kueue.WorkloadPriorityClassKind
	}
	return kueue.PriorityClassKind(pc.Kind)
}

func (s *Scenario) clusterQueue(name string) *ClusterQueue {
	for i := range s.ClusterQueues {
		if s.ClusterQueues[i].Name == name {
			return &s.ClusterQueues[i]
		}
	}
	return nil
}

// localQueues returns the scenario's LocalQueues, or one per ClusterQueue (same name, namespace
// default) when it declares none.
func (s *Scenario) localQueues() []LocalQueue {
	if len(s.LocalQueues) > 0 {
		return s.LocalQueues
	}
	out := make([]LocalQueue, 0, len(s.ClusterQueues))
	for _, cq := range s.ClusterQueues {
		out = append(out, LocalQueue{Name: cq.Name, Namespace: DefaultNamespace, ClusterQueue: cq.Name})
	}
	return out
}

func (s *Scenario) localQueuesNamed(name, namespace string) []LocalQueue {
	var out []LocalQueue
	for _, lq := range s.localQueues() {
		if lq.Name == name && (namespace == "" || lq.namespace() == namespace) {
			out = append(out, lq)
		}
	}
	return out
}

// localQueueFor returns the first LocalQueue pointing to cq.
func (s *Scenario) localQueueFor(cq string) (LocalQueue, bool) {
	for _, lq := range s.localQueues() {
		if lq.ClusterQueue == cq {
			return lq, true
		}
	}
	return LocalQueue{}, false
}

func (s *Scenario) timeshareConfig() *tsconfig.Configuration {
	c := &tsconfig.Configuration{ReclaimResolveMethod: tsconfig.ReclaimResolveMethod(s.Timeshare.ReclaimResolveMethod)}
	c.DefaultPreemptMinRuntime = s.Timeshare.DefaultPreemptMinRuntime.meta()
	c.DefaultReclaimMinRuntime = s.Timeshare.DefaultReclaimMinRuntime.meta()
	c.DefaultRequeueDelay = s.Timeshare.DefaultRequeueDelay.meta()
	c.DefaultNoticePeriod = s.Timeshare.DefaultNoticePeriod.meta()
	tsconfig.SetDefaults(c)
	return c
}

// expand lists the scenario's workloads with copies expanded and queues resolved, in arrival
// order (declaration order among equal arrivals). ok is false if some reference does not resolve.
func (s *Scenario) expand() (out []WorkloadSpec, ok bool) {
	ok = true
	classes := map[string]PriorityClass{}
	for _, pc := range s.PriorityClasses {
		classes[pc.Name] = pc
	}
	for i, w := range s.Workloads {
		p := fmt.Sprintf("workloads[%d]", i)
		var lq LocalQueue
		switch {
		case w.ClusterQueue != "":
			lq, ok = s.localQueueFor(w.ClusterQueue)
			if !ok {
				lq = LocalQueue{Name: w.ClusterQueue, Namespace: DefaultNamespace, ClusterQueue: w.ClusterQueue}
				ok = true
			}
		default:
			matches := s.localQueuesNamed(w.Queue, w.Namespace)
			if len(matches) != 1 {
				ok = false
				continue
			}
			lq = matches[0]
		}
		requests := corev1.ResourceList{}
		for r, q := range w.Resources {
			requests[corev1.ResourceName(r)] = q.Quantity
		}
		pods := w.Pods
		if pods == 0 {
			pods = 1
		}
		copies := max(w.Copies, 1)
		for c := range copies {
			spec := WorkloadSpec{
				Name:               w.Name,
				Namespace:          lq.namespace(),
				LocalQueue:         lq.Name,
				ClusterQueue:       lq.ClusterQueue,
				Arrival:            w.Arrival.Duration,
				Duration:           w.Duration.Duration,
				Checkpointed:       w.Checkpointed,
				CheckpointInterval: durationOf(w.CheckpointInterval),
				CheckpointDuration: durationOf(w.CheckpointDuration),
				Pods:               pods,
				Requests:           requests,
				Annotations:        w.Annotations,
				Snapshot:           w.Snapshot,
				path:               p,
			}
			spec.Snapshot = s.resolvedSnapshot(spec)
			if copies > 1 {
				spec.Name = fmt.Sprintf("%s-%d", w.Name, c+1)
				if w.Every != nil {
					spec.Arrival += time.Duration(c) * w.Every.Duration
				}
			}
			if pc, found := classes[w.PriorityClass]; found {
				spec.PriorityClass, spec.PriorityKind, spec.Priority = pc.Name, pc.kind(), pc.Value
			}
			out = append(out, spec)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Arrival < out[j].Arrival })
	return out, ok
}

// WorkloadSpecs returns the scenario's workloads with copies expanded, in arrival order.
func (s *Scenario) WorkloadSpecs() []WorkloadSpec {
	out, _ := s.expand()
	return out
}

func (d *Duration) meta() *metav1.Duration {
	if d == nil {
		return nil
	}
	return &metav1.Duration{Duration: d.Duration}
}

// durationOf is d's duration, 0 when unset.
func durationOf(d *Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

// checkpoints checks checkpointInterval and checkpointDuration, which model how much work an
// eviction loses.
func (v *validator) checkpoints(p string, w Workload) {
	v.positive(child(p, "checkpointInterval"), w.CheckpointInterval)
	v.nonNegative(child(p, "checkpointDuration"), w.CheckpointDuration)
	if w.CheckpointInterval != nil && w.Checkpointed {
		v.errorf(child(p, "checkpointInterval"), "not with checkpointed: true, which keeps all progress at every eviction; use one or the other")
	}
	if w.CheckpointDuration != nil && w.CheckpointInterval == nil {
		v.errorf(child(p, "checkpointDuration"), "only applies with checkpointInterval")
	}
}
