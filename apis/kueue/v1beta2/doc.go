// Package v1beta2 holds the fields kueue-timeshare adds to Kueue's kueue.x-k8s.io/v1beta2 kinds.
// They are not new kinds: they live inside the existing objects (for example
// ClusterQueue.spec.preemption.withinClusterQueueConfig), where upstream's typed clients do not
// see them, so the manager reads them from the object's JSON with the helpers here.
//
// +kubebuilder:object:generate=false
// +groupName=kueue.x-k8s.io
package v1beta2
