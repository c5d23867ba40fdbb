package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
)

// applyDir creates every object in the YAML files of dir, in file-name order.
func applyDir(ctx context.Context, c client.Client, dir string) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no *.yaml files in %s", dir)
	}
	sort.Strings(files)
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return n, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return n, fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := c.Create(ctx, &u); err != nil {
				return n, fmt.Errorf("%s: creating %s %s: %w", filepath.Base(f), u.GetKind(), u.GetName(), err)
			}
			n++
		}
	}
	return n, nil
}

// watch redraws the live view until ctx ends or the manager exits.
func watch(ctx context.Context, c client.Client, estimates estimatesFunc, every time.Duration, tty bool, header string, mgr *managerProcess, cp *controlplane.ControlPlane) error {
	var last string
	for {
		if mgr.exited() {
			return fmt.Errorf("manager exited: %v", mgr.err)
		}
		if err := cp.Exited(); err != nil {
			return err
		}
		view, key, err := render(ctx, c, estimates, cp.Pods())
		if err != nil && ctx.Err() == nil {
			view = "error reading state: " + err.Error() + "\n"
		}
		switch {
		case ctx.Err() != nil:
		case tty:
			// Home the cursor and clear, so the view refreshes in place.
			fmt.Print("\033[H\033[2J" + header + "\n" + time.Now().Format(time.TimeOnly) + "\n" + view)
		case key != last:
			// Without a terminal, print only when a workload changes state.
			fmt.Print("\n" + time.Now().Format(time.TimeOnly) + "\n" + view)
		}
		last = key
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

type row struct {
	state, name, detail string
	// pods says where the workload's Pods are and in which phase; empty without Pods.
	pods string
	// units are what the policy's units say of it that is worth a redraw when it changes (a
	// notice given, its checkpoint done).
	units string
}

// render returns the view and a key that changes only when some workload changes state.
// estimates, when not nil, add each pending workload's admission estimate.
func render(ctx context.Context, c client.Client, estimates estimatesFunc, withPods bool) (view, key string, err error) {
	var cqs kueue.ClusterQueueList
	if err := c.List(ctx, &cqs); err != nil {
		return "", "", err
	}
	var lqs kueue.LocalQueueList
	if err := c.List(ctx, &lqs); err != nil {
		return "", "", err
	}
	var wls kueue.WorkloadList
	if err := c.List(ctx, &wls); err != nil {
		return "", "", err
	}
	var podsOf map[string][]corev1.Pod
	if withPods {
		var pods corev1.PodList
		if err := c.List(ctx, &pods); err != nil {
			return "", "", err
		}
		podsOf = podsByOwner(pods.Items)
	}
	cqOfLQ := map[string]string{}
	for _, lq := range lqs.Items {
		cqOfLQ[lq.Namespace+"/"+lq.Name] = string(lq.Spec.ClusterQueue)
	}
	rows := map[string][]row{}
	notes := map[string]map[string]string{}
	for i := range wls.Items {
		wl := &wls.Items[i]
		cq := cqOfLQ[wl.Namespace+"/"+string(wl.Spec.QueueName)]
		if wl.Status.Admission != nil {
			cq = string(wl.Status.Admission.ClusterQueue)
		}
		if cq == "" {
			cq = "(no ClusterQueue)"
		}
		r := describe(wl, time.Now())
		if r.state == "PENDING" && estimates != nil {
			if _, ok := notes[cq]; !ok {
				notes[cq] = estimates(ctx, cq)
			}
			if note := notes[cq][r.name]; note != "" {
				r.detail = note + "; " + r.detail
			}
		}
		if withPods {
			r.pods = describePods(workloadPods(wl, podsOf))
		}
		rows[cq] = append(rows[cq], r)
	}

	var b, k strings.Builder
	names := make([]string, 0, len(cqs.Items))
	for _, cq := range cqs.Items {
		names = append(names, cq.Name)
	}
	for cq := range rows {
		if !slices.Contains(names, cq) {
			names = append(names, cq)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		b.WriteString("no ClusterQueues yet\n")
	}
	for _, name := range names {
		rs := rows[name]
		sort.SliceStable(rs, func(i, j int) bool {
			if rs[i].state != rs[j].state {
				return stateOrder(rs[i].state) < stateOrder(rs[j].state)
			}
			return rs[i].name < rs[j].name
		})
		fmt.Fprintf(&b, "\nClusterQueue %s: %d admitted, %d pending\n", name, count(rs, "ADMITTED"), count(rs, "PENDING"))
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for _, r := range rs {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.state, r.name, r.detail)
			if r.pods != "" {
				fmt.Fprintf(tw, "  \t  pods: %s\t\n", r.pods)
			}
			fmt.Fprintf(&k, "%s %s %s %s %s\n", name, r.state, r.name, r.pods, r.units)
		}
		tw.Flush()
	}
	return b.String(), k.String(), nil
}

func describe(wl *kueue.Workload, now time.Time) row {
	r := row{name: wl.Namespace + "/" + wl.Name}
	switch {
	case apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished):
		r.state = "FINISHED"
	case workload.IsAdmitted(wl):
		r.state = "ADMITTED"
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); c != nil {
			r.detail = "for " + now.Sub(c.LastTransitionTime.Time).Truncate(time.Second).String()
		}
		for _, u := range plugins.Units() {
			s, ok := u.Plugin.(statusShower)
			if !ok {
				continue
			}
			if detail, key := s.Status(wl, now); detail != "" {
				r.detail += "; " + detail
				r.units += key
			}
		}
	case workload.HasQuotaReservation(wl):
		r.state = "RESERVED"
		r.detail = "quota reserved, waiting for admission checks"
	default:
		r.state = "PENDING"
		r.detail = "waiting; the scheduler has not tried it yet"
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil && c.Message != "" {
			r.detail = c.Message
		}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == "True" {
			r.detail = "evicted (" + c.Reason + "): " + r.detail
		}
	}
	return r
}

func stateOrder(s string) int {
	return slices.Index([]string{"ADMITTED", "RESERVED", "PENDING", "FINISHED"}, s)
}

func count(rs []row, state string) int {
	n := 0
	for _, r := range rs {
		if r.state == state {
			n++
		}
	}
	return n
}

// podsByOwner indexes Pods by the object that owns them ("Job/ns/name"), and each Pod also by
// itself ("Pod/ns/name"), since a plain Pod is its own workload's owner.
func podsByOwner(pods []corev1.Pod) map[string][]corev1.Pod {
	out := map[string][]corev1.Pod{}
	for _, p := range pods {
		out["Pod/"+p.Namespace+"/"+p.Name] = append(out["Pod/"+p.Namespace+"/"+p.Name], p)
		for _, ref := range p.OwnerReferences {
			key := ref.Kind + "/" + p.Namespace + "/" + ref.Name
			out[key] = append(out[key], p)
		}
	}
	return out
}

func workloadPods(wl *kueue.Workload, podsOf map[string][]corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, ref := range wl.OwnerReferences {
		out = append(out, podsOf[ref.Kind+"/"+wl.Namespace+"/"+ref.Name]...)
	}
	return out
}

// describePods summarises Pods as their state and Node, e.g. "Running node-1, Terminating node-2".
func describePods(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return ""
	}
	parts := make([]string, 0, len(pods))
	for _, p := range pods {
		state := string(p.Status.Phase)
		switch {
		case p.DeletionTimestamp != nil:
			state = "Terminating"
		case p.Status.Phase == corev1.PodRunning && !podReady(&p):
			state = "Running (not ready)"
		case p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "":
			state = "Pending (unscheduled)"
		}
		if p.Spec.NodeName != "" {
			state += " " + p.Spec.NodeName
		}
		parts = append(parts, state)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// estimatesFunc gives the notes of a ClusterQueue's admission estimates, by pending workload
// ("namespace/name"); nil when it has none.
type estimatesFunc func(ctx context.Context, cq string) map[string]string

// visibilityEstimates reads the estimates from the visibility API the manager serves at addr.
func visibilityEstimates(cp *controlplane.ControlPlane, addr string) (estimatesFunc, error) {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Host = "https://" + addr
	cfg.CAData, cfg.CAFile = cp.ServingCA(), ""
	vis, err := visibilityclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, cq string) map[string]string {
		s, err := vis.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, cq, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		out := map[string]string{}
		for _, p := range s.Items {
			if note := estimateNote(p.Annotations[annotations.EstimatedAdmission], p.Annotations[annotations.AdmissionEstimate]); note != "" {
				out[p.Namespace+"/"+p.Name] = note
			}
		}
		return out
	}, nil
}

// estimateNote is a pending workload's estimate in the view: the manager's sentence, or why it
// is unknown; "" without one.
func estimateNote(eta, sentence string) string {
	switch {
	case eta == "":
		return ""
	case eta == annotations.EstimateUnknown && sentence != "":
		return "expected admission unknown: " + sentence
	case eta == annotations.EstimateUnknown:
		return "expected admission unknown"
	case sentence != "":
		return sentence
	}
	return "expected at " + eta
}

// statusShower is a feature's plugin (policy.Unit.Plugin) that says something of a running
// workload in the view: the detail, and the part of it worth redrawing the view for ("": nothing).
type statusShower interface {
	Status(wl *kueue.Workload, now time.Time) (detail, key string)
}
