// Package annotations defines the annotations kueue-timeshare reads on objects it does not own
// (priority classes, Jobs, Workloads), how they are parsed, and the validation rules that the
// webhooks apply and the controllers re-check.
package annotations
