package app

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// holdingColumn is a column of the table of workloads holding quota.
type holdingColumn struct {
	header string
	cell   func(a *AdmittedWorkload, now time.Time) string
}

// newTable aligns columns as kubectl get does.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 6, 4, 3, ' ', 0) }

// RenderQueues writes r as tables: per ClusterQueue its settings, holders and pending workloads.
func RenderQueues(w io.Writer, r *QueuesReport, wide bool, now time.Time) error {
	fmt.Fprintf(w, "Manager settings: %s\n", r.Manager)
	columns := featureColumns()
	if len(r.ClusterQueues) == 0 {
		fmt.Fprintln(w, "No ClusterQueues.")
	}
	for _, cq := range r.ClusterQueues {
		fmt.Fprintln(w)
		title := "ClusterQueue " + cq.Name
		if cq.Cohort != "" {
			title += " (Cohort " + cq.Cohort + ")"
		}
		fmt.Fprintln(w, title)
		if cq.Problem != "" {
			fmt.Fprintf(w, "Warning: %s\n", cq.Problem)
		}
		t := newTable(w)
		fmt.Fprintln(t, "SETTING\tVALUE\tSOURCE")
		for _, s := range cq.Settings {
			fmt.Fprintf(t, "%s\t%s\t%s\n", s.Name, orNone(s.Value), s.Source+reclaimers(s.Against))
		}
		if err := t.Flush(); err != nil {
			return err
		}

		fmt.Fprintln(w)
		if len(cq.Admitted) == 0 {
			fmt.Fprintln(w, "No workloads hold quota.")
		} else {
			t = newTable(w)
			header := "HOLDING QUOTA\tPRIORITY\tSINCE\tPROTECTED UNTIL\tPROTECTED BY\tTURN ENDS"
			columnsShown := holdingColumns()
			for _, c := range columnsShown {
				header += "\t" + c.header
			}
			if wide {
				header += "\tLOCAL QUEUE\tADMITTED\tRUNNING COUNTED FROM"
				for _, c := range columns {
					header += "\t" + c.Header
				}
				header += "\tSTATE"
			}
			fmt.Fprintln(t, header)
			for _, a := range cq.Admitted {
				until, by := protectionColumns(a.Protections, now)
				fmt.Fprintf(t, "%s/%s\t%d\t%s\t%s\t%s\t%s", a.Namespace, a.Name, a.Priority, when(a.QuotaReserved, now), until, by, when(a.TurnEnds, now))
				for _, c := range columnsShown {
					fmt.Fprintf(t, "\t%s", c.cell(&a, now))
				}
				if wide {
					state := "holding"
					if a.Evicting {
						state = "being evicted"
					}
					fmt.Fprintf(t, "\t%s\t%s\t%s", orNone(a.LocalQueue), when(a.Admitted, now), orNone(a.RunningCounted))
					for _, c := range columns {
						cell := "<none>"
						if f, ok := a.Features[string(c.feature)]; ok {
							cell = when(f.From, now) + " (" + c.Label + " " + f.Value + ")"
						}
						fmt.Fprintf(t, "\t%s", cell)
					}
					fmt.Fprintf(t, "\t%s", state)
				}
				fmt.Fprintln(t)
			}
			if err := t.Flush(); err != nil {
				return err
			}
		}

		fmt.Fprintln(w)
		fmt.Fprintf(w, "Pending in %s:\n", cq.PendingOrder)
		if len(cq.Pending) == 0 {
			fmt.Fprintln(w, "No pending workloads.")
			continue
		}
		t = newTable(w)
		// A manager that gives no estimates gets no ETA column.
		estimated := slices.ContainsFunc(cq.Pending, func(p PendingWorkload) bool { return p.ETA != "" })
		eta := ""
		if estimated {
			eta = "ETA\t"
		}
		header := "POSITION\tWORKLOAD\tPRIORITY\t" + eta + "WAITING BECAUSE (the manager's words)"
		if wide {
			header = "POSITION\tWORKLOAD\tPRIORITY\t" + eta + "LOCAL QUEUE\tCREATED\tREASON\tWAITING BECAUSE (the manager's words)"
		}
		fmt.Fprintln(t, header)
		for _, p := range cq.Pending {
			msg := orNone(p.Message)
			if estimated {
				eta = etaOf(p, now) + "\t"
			}
			if wide {
				fmt.Fprintf(t, "%d\t%s/%s\t%d\t%s%s\t%s\t%s\t%s\n", p.Position, p.Namespace, p.Name, p.Priority, eta, orNone(p.LocalQueue), when(p.Created, now), orNone(p.Reason), msg)
			} else {
				fmt.Fprintf(t, "%d\t%s/%s\t%d\t%s%s\n", p.Position, p.Namespace, p.Name, p.Priority, eta, msg)
			}
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// protectionColumns shows the protection that lasts longest among those still in force, or
// <none> when nothing protects the workload now.
func protectionColumns(ps []Protection, now time.Time) (string, string) {
	var best *Protection
	for i := range ps {
		p := &ps[i]
		if !p.Active {
			continue
		}
		if best == nil || (p.Until == nil) || (best.Until != nil && p.Until.After(best.Until.Time)) {
			best = p
		}
	}
	if best == nil {
		return "<none>", "<none>"
	}
	by := best.Source + reclaimers(best.Against)
	if best.Forever {
		return "for as long as it runs", by
	}
	if best.Until == nil {
		return "until its Pods are ready, then for its min-runtime", by
	}
	return when(best.Until, now), by
}

func reclaimers(against []string) string {
	if len(against) == 0 {
		return ""
	}
	return " (reclaim by " + strings.Join(against, ", ") + ")"
}

// when is an RFC 3339 time with how long ago or ahead it is.
func when(t *metav1.Time, now time.Time) string {
	if t == nil {
		return "<none>"
	}
	s := t.UTC().Format(time.RFC3339)
	d := t.Sub(now)
	switch {
	case d > 0:
		return s + " (in " + duration.HumanDuration(d) + ")"
	case d < 0:
		return s + " (" + duration.HumanDuration(-d) + " ago)"
	}
	return s + " (now)"
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// RenderExplain writes r: what the workload is doing, the rule that decided it, and its history.
func RenderExplain(w io.Writer, r *ExplainReport, wide bool, now time.Time) error {
	fmt.Fprintf(w, "Workload %s/%s\n", r.Namespace, r.Name)
	t := newTable(w)
	fmt.Fprintf(t, "LocalQueue:\t%s\n", orNone(r.LocalQueue))
	fmt.Fprintf(t, "ClusterQueue:\t%s\n", orNone(r.ClusterQueue))
	fmt.Fprintf(t, "Priority:\t%d\n", r.Priority)
	fmt.Fprintf(t, "State:\t%s\n", r.State)
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if d := r.Wait; d != nil {
		fmt.Fprintf(w, "Why it waits (%s=%s, reason %s, since %s):\n  %s\n", d.Condition, d.Status, d.Reason, when(d.Since, now), d.Message)
	}
	if r.ETA != "" {
		fmt.Fprintf(w, "Expected admission: %s\n", expectedAdmission(r.ETA, r.Estimate, now))
	}
	if d := r.LastPreemption; d != nil {
		reason := d.Reason
		if reason == "" {
			reason = "no longer recorded"
		}
		fmt.Fprintf(w, "Its last preemption (%s=%s, reason %s, at %s):\n  %s\n", d.Condition, d.Status, reason, when(d.Since, now), d.Message)
	}
	explained := r.Wait != nil || r.LastPreemption != nil || r.ETA != ""
	for _, v := range views() {
		if v.explainSection == nil {
			continue
		}
		shown, err := v.explainSection(w, r, now)
		if err != nil {
			return err
		}
		explained = explained || shown
	}
	if !explained {
		fmt.Fprintln(w, "No wait, preemption or notice to explain.")
	}
	if len(r.Evictions) > 0 || r.Requeues != nil {
		fmt.Fprintln(w)
		var parts []string
		for _, e := range r.Evictions {
			s := fmt.Sprintf("%s x%d", e.Reason, e.Count)
			if e.UnderlyingCause != "" {
				s += " (" + e.UnderlyingCause + ")"
			}
			parts = append(parts, s)
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "Evictions: %s\n", strings.Join(parts, ", "))
		}
		if r.Requeues != nil {
			fmt.Fprintf(w, "Requeues: %d", r.Requeues.Count)
			if r.Requeues.RequeueAt != nil {
				fmt.Fprintf(w, ", next at %s", when(r.Requeues.RequeueAt, now))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "History:")
	t = newTable(w)
	header := "TIME\tFROM\tWHAT\tREASON\tMESSAGE"
	if wide {
		header += "\tCOUNT"
	}
	fmt.Fprintln(t, header)
	for _, h := range r.History {
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s", when(h.Time, now), h.Source, h.What, orNone(h.Reason), orNone(h.Message))
		if wide {
			c := ""
			if h.Count > 1 {
				c = fmt.Sprint(h.Count)
			}
			fmt.Fprintf(t, "\t%s", orNone(c))
		}
		fmt.Fprintln(t)
	}
	return t.Flush()
}

// etaOf is a pending workload's estimate as a time relative to now, or "unknown" with its reason.
func etaOf(p PendingWorkload, now time.Time) string {
	at, err := time.Parse(time.RFC3339, p.ETA)
	if err != nil {
		if p.Estimate != "" {
			return orNone(p.ETA) + " (" + p.Estimate + ")"
		}
		return orNone(p.ETA)
	}
	return when(&metav1.Time{Time: at}, now)
}

// expectedAdmission is an estimate in words: the manager's sentence and the time it gives (whose
// "around 14:05" is in the manager's time zone), or "unknown" with the reason.
func expectedAdmission(eta, sentence string, now time.Time) string {
	at, err := time.Parse(time.RFC3339, eta)
	switch {
	case err == nil && sentence != "":
		return sentence + "\n  at " + when(&metav1.Time{Time: at}, now)
	case err == nil:
		return when(&metav1.Time{Time: at}, now)
	case sentence != "":
		return eta + ": " + sentence
	}
	return eta
}
