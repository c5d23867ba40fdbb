package simulator

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// job is the emulated job behind one Workload: it runs while its Workload is admitted, and
// finishes once it has run its duration. A preempted job starts over when it is admitted again,
// unless it is checkpointed.
type job struct {
	spec WorkloadSpec
	key  types.NamespacedName
	uid  types.UID

	state jobState
	// since is when the current state began.
	since time.Duration
	// progress is the run time already banked (checkpointed jobs only).
	progress time.Duration
	// finishAt is when a running job completes.
	finishAt time.Duration

	intervals  []Interval
	admissions int
	// lost is run time thrown away by evictions (all of it for a job without checkpoints).
	lost        time.Duration
	preemptions map[string]int
	finishedAt  time.Duration
}

type jobState int

const (
	notArrived jobState = iota
	pending
	running
	done
)

func newJob(spec WorkloadSpec, uid types.UID) *job {
	return &job{
		spec:        spec,
		key:         types.NamespacedName{Namespace: spec.Namespace, Name: spec.Name},
		uid:         uid,
		preemptions: map[string]int{},
	}
}

func (j *job) arrived(now time.Duration) {
	j.state, j.since = pending, now
}

func (j *job) admitted(now time.Duration) {
	j.close(now)
	j.state, j.since = running, now
	j.admissions++
	j.finishAt = now + j.spec.Duration - j.progress
}

func (j *job) evicted(now time.Duration, reason string) {
	if j.state != running {
		return
	}
	j.close(now)
	if j.spec.Checkpointed {
		j.progress += now - j.since
	} else {
		j.lost += now - j.since
	}
	j.state, j.since = pending, now
	j.preemptions[reason]++
}

func (j *job) finished(now time.Duration) {
	j.close(now)
	j.state, j.since, j.finishedAt = done, now, now
}

// close ends the current interval at now.
func (j *job) close(now time.Duration) {
	if j.state != pending && j.state != running {
		return
	}
	if now > j.since {
		j.intervals = append(j.intervals, Interval{From: j.since, To: now, Running: j.state == running})
	}
}

// Interval is a span of a workload's life: waiting (pending) or holding quota (running).
type Interval struct {
	From    time.Duration
	To      time.Duration
	Running bool
}
