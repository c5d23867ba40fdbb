package annotations

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations of a preemption notice (the PreemptionNotice feature). The notice itself is the
// victim Workload's PreemptionNotice condition, in its status (policy.ReadNotice); the manager
// copies it into the first two, on the Workload and (the deadline) on its running Pods, where a
// process reads it through a downward API volume. A user or a sidecar writes the third.
const (
	// PreemptionDeadline (manager-owned, RFC 3339): when the workload is evicted unless its notice
	// ends earlier. On the Workload and on its running Pods.
	PreemptionDeadline = "kueue-timeshare.io/preemption-deadline"
	// PreemptionNotice (manager-owned, JSON): who needs the workload's room and why.
	PreemptionNotice = "kueue-timeshare.io/preemption-notice"
	// CheckpointDone: "true" on a job (copied to its Workload) or on a Workload under notice says
	// its work is saved, so it is evicted now instead of at the deadline.
	CheckpointDone = "kueue-timeshare.io/checkpoint-done"
)

// Notice is a preemption notice on a Workload.
type Notice struct {
	// Start is when the notice was given; Deadline when the eviction happens at the latest.
	Start    time.Time `json:"start"`
	Deadline time.Time `json:"-"`
	// Reason is the preemption reason the eviction will carry (InClusterQueueTimeBased, ...).
	Reason string `json:"reason"`
	// Preemptor is the pending workload that needs the room ("namespace/name"), and its UID. The
	// name is left out (empty) when the preemptor is of another namespace than the Workload under
	// notice: that Workload's owner reads the notice, and another team's workload is known to it by
	// UID only.
	Preemptor    string    `json:"preemptor,omitempty"`
	PreemptorUID types.UID `json:"preemptorUID"`
}

// OtherNamespaceWorkload is how text written for a namespace's users names a workload of another
// namespace.
const OtherNamespaceWorkload = "a workload of another namespace"

// PreemptorName is n's preemptor as "namespace/name", or OtherNamespaceWorkload when the name is
// left out.
func (n *Notice) PreemptorName() string {
	if n.Preemptor == "" {
		return OtherNamespaceWorkload
	}
	return n.Preemptor
}

// PreemptorText names n's preemptor for the users of the Workload under notice: "workload
// namespace/name", or OtherNamespaceWorkload when the name is left out.
func (n *Notice) PreemptorText() string {
	if n.Preemptor == "" {
		return OtherNamespaceWorkload
	}
	return "workload " + n.Preemptor
}

// Limits on what a notice may hold. A tenant can write these annotations on its own Workload, so
// every field is bounded before anything reads or repeats it.
const (
	maxNoticeBytes = 1024
	maxReasonBytes = 64
	maxUIDBytes    = 128
)

// conditionReason is the pattern of a condition's reason, which a notice's reason becomes.
var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// ParseNotice reads the notice on a Workload's annotations: nil when there is none, an error
// naming the annotation and the rule when one is there but malformed. A well-formed notice is
// not yet one the manager gave: policy.ReadNotice checks that against the manager's record.
func ParseNotice(ann map[string]string) (*Notice, error) {
	raw, ok := ann[PreemptionNotice]
	if !ok {
		return nil, nil
	}
	if len(raw) > maxNoticeBytes {
		return nil, fmt.Errorf("annotation %s: %d bytes, must be at most %d", PreemptionNotice, len(raw), maxNoticeBytes)
	}
	var n Notice
	if err := json.Unmarshal([]byte(raw), &n); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", PreemptionNotice, err)
	}
	if n.PreemptorUID == "" || n.Reason == "" {
		return nil, fmt.Errorf("annotation %s: preemptorUID and reason are required", PreemptionNotice)
	}
	if len(n.Reason) > maxReasonBytes || !conditionReason.MatchString(n.Reason) {
		return nil, fmt.Errorf("annotation %s: reason must be a condition reason of at most %d characters", PreemptionNotice, maxReasonBytes)
	}
	if len(n.PreemptorUID) > maxUIDBytes {
		return nil, fmt.Errorf("annotation %s: preemptorUID must be at most %d characters", PreemptionNotice, maxUIDBytes)
	}
	if ns, name, ok := strings.Cut(n.Preemptor, "/"); n.Preemptor != "" && (!ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0) {
		return nil, fmt.Errorf("annotation %s: preemptor must be namespace/name of a Workload, or left out", PreemptionNotice)
	}
	if n.Start.IsZero() {
		return nil, fmt.Errorf("annotation %s: start is required", PreemptionNotice)
	}
	deadline, err := time.Parse(time.RFC3339, ann[PreemptionDeadline])
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", PreemptionDeadline, err)
	}
	if !deadline.After(n.Start.Truncate(time.Second)) {
		return nil, fmt.Errorf("annotation %s: must be after the notice's start", PreemptionDeadline)
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
