// Package annotations defines the annotations kueue-timeshare reads on objects it does not own
// (priority classes, Jobs, Workloads), how they are parsed, and the validation rules that the
// webhooks apply and the controllers re-check.
package annotations

// ManagerOwned lists the annotations only the manager writes on a Workload and later reads back.
// A Workload's owner can write its annotations, so the webhook refuses any change to these by
// anyone but the manager, and every reader checks them against the manager's own record.
func ManagerOwned() []string {
	return []string{PreemptionNotice, PreemptionDeadline, RequeueNotBefore}
}
