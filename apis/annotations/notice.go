package annotations

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Annotations of a preemption notice (the PreemptionNotice feature). The manager writes the first
// two on a Workload chosen as a victim while its notice runs, and the deadline on its running Pods,
// where a process reads it through a downward API volume; a user or a sidecar writes the third.
const (
	// PreemptionDeadline (system-managed, RFC 3339): when the workload is evicted unless its notice
	// ends earlier. On the Workload and on its running Pods.
	PreemptionDeadline = "kueue-timeshare.io/preemption-deadline"
	// PreemptionNotice (system-managed, JSON): who needs the workload's room and why; the notice is
	// in force while it is present.
	PreemptionNotice = "kueue-timeshare.io/preemption-notice"
	// CheckpointDone: "true" on a job (copied to its Workload) or on a Workload under notice says
	// its work is saved, so it is evicted now instead of at the deadline.
	CheckpointDone = "kueue-timeshare.io/checkpoint-done"
)

// Notice is a preemption notice in force on a Workload.
type Notice struct {
	// Start is when the notice was given; Deadline when the eviction happens at the latest.
	Start    time.Time `json:"start"`
	Deadline time.Time `json:"-"`
	// Reason is the preemption reason the eviction will carry (InClusterQueueTimeBased, ...).
	Reason string `json:"reason"`
	// Preemptor is the pending workload that needs the room ("namespace/name"), and its UID.
	Preemptor    string    `json:"preemptor"`
	PreemptorUID types.UID `json:"preemptorUID"`
}

// ParseNotice reads the notice in force on a Workload's annotations: nil when there is none, an
// error naming the annotation when one is there but unreadable.
func ParseNotice(ann map[string]string) (*Notice, error) {
	raw, ok := ann[PreemptionNotice]
	if !ok {
		return nil, nil
	}
	var n Notice
	if err := json.Unmarshal([]byte(raw), &n); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", PreemptionNotice, err)
	}
	if n.PreemptorUID == "" || n.Reason == "" {
		return nil, fmt.Errorf("annotation %s: preemptorUID and reason are required", PreemptionNotice)
	}
	deadline, err := time.Parse(time.RFC3339, ann[PreemptionDeadline])
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", PreemptionDeadline, err)
	}
	n.Deadline = deadline
	return &n, nil
}

// Annotations are n written as annotations; times are kept to the second, as RFC 3339 has them.
func (n Notice) Annotations() map[string]string {
	n.Start = n.Start.UTC().Truncate(time.Second)
	raw, _ := json.Marshal(n)
	return map[string]string{
		PreemptionNotice:   string(raw),
		PreemptionDeadline: n.Deadline.UTC().Format(time.RFC3339),
	}
}

// CheckpointIsDone reports whether the annotations say the workload's work is saved.
func CheckpointIsDone(ann map[string]string) bool {
	return ann[CheckpointDone] == "true"
}
