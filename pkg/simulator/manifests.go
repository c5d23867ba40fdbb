package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuewebhooks "sigs.k8s.io/kueue/pkg/webhooks"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

// ValidateClusterQueueObject runs the checks the manager's webhooks run on a ClusterQueue
// (upstream's ClusterQueue validation and ours for kueue-timeshare's fields) and returns the
// error the API server would give, or nil.
func ValidateClusterQueueObject(u *unstructured.Unstructured) error {
	cq, err := typedClusterQueue(u)
	if err != nil {
		return err
	}
	errs := kueuewebhooks.ValidateClusterQueue(cq)
	spec, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return err
	}
	ext, err := tsapi.ParseClusterQueueExtension(spec)
	if err != nil {
		return fmt.Errorf("ClusterQueue %s: %w", u.GetName(), err)
	}
	errs = append(errs, tsapi.ValidateClusterQueueExtension(ext, cq.Spec.Preemption)...)
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: kueue.SchemeGroupVersion.Group, Kind: "ClusterQueue"}, u.GetName(), errs)
	}
	return nil
}

// ValidateCohortObject runs the checks the manager's webhooks run on a Cohort (upstream's Cohort
// webhook and ours for kueue-timeshare's fields) and returns the error the API server would give,
// or nil.
func ValidateCohortObject(u *unstructured.Unstructured) error {
	typed, err := typedCohort(u)
	if err != nil {
		return err
	}
	var errs field.ErrorList
	if _, err := (&kueuewebhooks.CohortWebhook{}).ValidateCreate(context.Background(), typed); err != nil {
		var agg utilerrors.Aggregate
		if !errors.As(err, &agg) {
			return fmt.Errorf("Cohort %s: %w", u.GetName(), err)
		}
		for _, e := range agg.Errors() {
			var fe *field.Error
			if !errors.As(e, &fe) {
				return fmt.Errorf("Cohort %s: %w", u.GetName(), e)
			}
			errs = append(errs, fe)
		}
	}
	spec, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return err
	}
	ext, err := tsapi.ParseCohortExtension(spec)
	if err != nil {
		return fmt.Errorf("Cohort %s: %w", u.GetName(), err)
	}
	errs = append(errs, tsapi.ValidateCohortExtension(ext)...)
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: kueue.SchemeGroupVersion.Group, Kind: "Cohort"}, u.GetName(), errs)
	}
	return nil
}

// ClusterQueueFromObject reads a ClusterQueue manifest (or object read from the API) as a
// scenario ClusterQueue. Notes name the fields set that the simulator does not model.
func ClusterQueueFromObject(u *unstructured.Unstructured) (ClusterQueue, []string, error) {
	cq := ClusterQueue{Name: u.GetName()}
	var notes []string
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	what := "ClusterQueue " + u.GetName()
	cq.Cohort, _, _ = unstructured.NestedString(spec, "cohortName")
	cq.QueueingStrategy, _, _ = unstructured.NestedString(spec, "queueingStrategy")
	quota, err := quotaFromObject(spec, what)
	if err != nil {
		return cq, nil, err
	}
	cq.Quota = quota
	if pr, ok, _ := unstructured.NestedMap(spec, "preemption"); ok {
		p := &Preemption{}
		p.WithinClusterQueue, _, _ = unstructured.NestedString(pr, "withinClusterQueue")
		p.ReclaimWithinCohort, _, _ = unstructured.NestedString(pr, "reclaimWithinCohort")
		if b, ok, _ := unstructured.NestedMap(pr, "borrowWithinCohort"); ok {
			bw := &BorrowWithinCohort{}
			bw.Policy, _, _ = unstructured.NestedString(b, "policy")
			if t, ok, _ := unstructured.NestedFieldNoCopy(b, "maxPriorityThreshold"); ok {
				v, err := toInt32(t)
				if err != nil {
					return cq, nil, fmt.Errorf("%s: spec.preemption.borrowWithinCohort.maxPriorityThreshold: %w", what, err)
				}
				bw.MaxPriorityThreshold = &v
			}
			p.BorrowWithinCohort = bw
		}
		if d, err := durationAt(pr, "withinClusterQueueConfig", "minAdmitDuration"); err != nil {
			return cq, nil, fmt.Errorf("%s: spec.preemption.withinClusterQueueConfig.minAdmitDuration: %w", what, err)
		} else if d != nil {
			p.WithinClusterQueueConfig = &WithinClusterQueueConfig{MinAdmitDuration: d}
		}
		if p.PreemptMinRuntime, err = durationAt(pr, "preemptMinRuntime"); err != nil {
			return cq, nil, fmt.Errorf("%s: spec.preemption.preemptMinRuntime: %w", what, err)
		}
		if p.ReclaimMinRuntime, err = durationAt(pr, "reclaimMinRuntime"); err != nil {
			return cq, nil, fmt.Errorf("%s: spec.preemption.reclaimMinRuntime: %w", what, err)
		}
		if p.NoticePeriod, p.NoticeOnPriorityPreemption, p.NoticeOnReclaim, err = noticeAt(pr, what); err != nil {
			return cq, nil, err
		}
		cq.Preemption = p
	}
	if w, err := weightAt(spec); err != nil {
		return cq, nil, fmt.Errorf("%s: spec.fairSharing.weight: %w", what, err)
	} else if w != nil {
		cq.FairSharing = &FairShareWeight{Weight: w}
	}
	for _, f := range []string{"admissionChecks", "admissionChecksStrategy", "admissionScope"} {
		if _, ok := spec[f]; ok {
			notes = append(notes, fmt.Sprintf("%s: spec.%s is not simulated", what, f))
		}
	}
	if sp, _, _ := unstructured.NestedString(spec, "stopPolicy"); sp != "" && sp != string(kueue.None) {
		notes = append(notes, fmt.Sprintf("%s: spec.stopPolicy %s is not simulated (the ClusterQueue admits as if it were None)", what, sp))
	}
	if sel, ok, _ := unstructured.NestedMap(spec, "namespaceSelector"); ok && len(sel) > 0 {
		notes = append(notes, fmt.Sprintf("%s: spec.namespaceSelector is not simulated (every namespace is admitted)", what))
	}
	if ff, ok, _ := unstructured.NestedMap(spec, "flavorFungibility"); ok {
		if b, _, _ := unstructured.NestedString(ff, "whenCanBorrow"); b != "" && b != string(kueue.MayStopSearch) {
			notes = append(notes, fmt.Sprintf("%s: spec.flavorFungibility.whenCanBorrow %s is not simulated", what, b))
		}
		if p, _, _ := unstructured.NestedString(ff, "whenCanPreempt"); p != "" && p != string(kueue.TryNextFlavor) {
			notes = append(notes, fmt.Sprintf("%s: spec.flavorFungibility.whenCanPreempt %s is not simulated", what, p))
		}
	}
	return cq, notes, nil
}

// CohortFromObject reads a Cohort manifest as a scenario Cohort.
func CohortFromObject(u *unstructured.Unstructured) (Cohort, error) {
	c := Cohort{Name: u.GetName()}
	what := "Cohort " + u.GetName()
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	c.Parent, _, _ = unstructured.NestedString(spec, "parentName")
	quota, err := quotaFromObject(spec, what)
	if err != nil {
		return c, err
	}
	c.Quota = quota
	if _, ok := spec["preemption"]; ok {
		m := &MinRuntimes{}
		if m.PreemptMinRuntime, err = durationAt(spec, "preemption", "preemptMinRuntime"); err != nil {
			return c, fmt.Errorf("%s: spec.preemption.preemptMinRuntime: %w", what, err)
		}
		if m.ReclaimMinRuntime, err = durationAt(spec, "preemption", "reclaimMinRuntime"); err != nil {
			return c, fmt.Errorf("%s: spec.preemption.reclaimMinRuntime: %w", what, err)
		}
		pr, _, _ := unstructured.NestedMap(spec, "preemption")
		if m.NoticePeriod, m.NoticeOnPriorityPreemption, m.NoticeOnReclaim, err = noticeAt(pr, what); err != nil {
			return c, err
		}
		c.Preemption = m
	}
	if w, err := weightAt(spec); err != nil {
		return c, fmt.Errorf("%s: spec.fairSharing.weight: %w", what, err)
	} else if w != nil {
		c.FairSharing = &FairShareWeight{Weight: w}
	}
	return c, nil
}

// quotaFromObject reads spec.resourceGroups as a scenario quota list. Flavors of one group list
// the same resources, which is how the scenario groups them again.
func quotaFromObject(spec map[string]any, what string) ([]FlavorQuota, error) {
	groups, _, _ := unstructured.NestedSlice(spec, "resourceGroups")
	var out []FlavorQuota
	for gi, g := range groups {
		gm, _ := g.(map[string]any)
		flavors, _, _ := unstructured.NestedSlice(gm, "flavors")
		for fi, f := range flavors {
			fm, _ := f.(map[string]any)
			name, _, _ := unstructured.NestedString(fm, "name")
			fq := FlavorQuota{Flavor: name, Resources: map[string]ResourceQuota{}}
			resources, _, _ := unstructured.NestedSlice(fm, "resources")
			for ri, r := range resources {
				rm, _ := r.(map[string]any)
				path := fmt.Sprintf("spec.resourceGroups[%d].flavors[%d].resources[%d]", gi, fi, ri)
				rname, _, _ := unstructured.NestedString(rm, "name")
				var rq ResourceQuota
				q, err := quantityAt(rm, "nominalQuota")
				if err != nil || q == nil {
					if err == nil {
						err = fmt.Errorf("required")
					}
					return nil, fmt.Errorf("%s: %s.nominalQuota: %w", what, path, err)
				}
				rq.Nominal = *q
				if rq.BorrowingLimit, err = quantityAt(rm, "borrowingLimit"); err != nil {
					return nil, fmt.Errorf("%s: %s.borrowingLimit: %w", what, path, err)
				}
				if rq.LendingLimit, err = quantityAt(rm, "lendingLimit"); err != nil {
					return nil, fmt.Errorf("%s: %s.lendingLimit: %w", what, path, err)
				}
				fq.Resources[rname] = rq
			}
			out = append(out, fq)
		}
	}
	return out, nil
}

func quantityAt(m map[string]any, fields ...string) (*Quantity, error) {
	v, ok, _ := unstructured.NestedFieldNoCopy(m, fields...)
	if !ok || v == nil {
		return nil, nil
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(fmt.Sprint(v)))
	if err != nil {
		return nil, fmt.Errorf("%v is not a quantity", v)
	}
	return &Quantity{q}, nil
}

// noticeAt reads the notice settings of a spec.preemption.
func noticeAt(pr map[string]any, what string) (period *Duration, onPriority, onReclaim *bool, err error) {
	if period, err = durationAt(pr, "noticePeriod"); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: spec.preemption.noticePeriod: %w", what, err)
	}
	for name, dst := range map[string]**bool{"noticeOnPriorityPreemption": &onPriority, "noticeOnReclaim": &onReclaim} {
		v, ok, e := unstructured.NestedBool(pr, name)
		if e != nil {
			return nil, nil, nil, fmt.Errorf("%s: spec.preemption.%s: %w", what, name, e)
		}
		if ok {
			*dst = &v
		}
	}
	return period, onPriority, onReclaim, nil
}

func durationAt(m map[string]any, fields ...string) (*Duration, error) {
	v, ok, _ := unstructured.NestedFieldNoCopy(m, fields...)
	if !ok || v == nil {
		return nil, nil
	}
	s, isString := v.(string)
	d, err := time.ParseDuration(s)
	if !isString || err != nil {
		return nil, fmt.Errorf("%v is not a duration", v)
	}
	return &Duration{d}, nil
}

func weightAt(spec map[string]any) (*Quantity, error) {
	return quantityAt(spec, "fairSharing", "weight")
}

func toInt32(v any) (int32, error) {
	switch x := v.(type) {
	case int64:
		return int32(x), nil
	case int32:
		return x, nil
	case int:
		return int32(x), nil
	case float64:
		if x == float64(int32(x)) {
			return int32(x), nil
		}
	}
	return 0, fmt.Errorf("%v is not a whole number", v)
}
