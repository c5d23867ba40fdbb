package simulator

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/timeutil"
)

// job is the emulated job behind one Workload: it runs while its Workload is admitted, and
// finishes once it has run its duration. A preempted job resumes, when it is admitted again, from
// its last completed checkpoint: from where it stopped when it is checkpointed (continuously),
// from the start when it declares no checkpoints.
type job struct {
	spec WorkloadSpec
	key  types.NamespacedName
	uid  types.UID

	state jobState
	// since is when the current state began.
	since time.Duration
	// progress is the run time already banked by checkpoints.
	progress time.Duration
	// finishAt is when a running job completes.
	finishAt time.Duration

	// toggle is what its owner does next to spec.active, at toggleAt (WorkloadSpec.DeactivateAfter).
	toggle   activeToggle
	toggleAt time.Duration

	// warning is the warning before eviction in force on a running job, if any.
	warning *jobWarning
	// res is what the report says of the job, filled in as it goes.
	res WorkloadResult
}

// activeToggle is a change of spec.active a workload's owner makes.
type activeToggle int

const (
	noToggle activeToggle = iota
	deactivate
	reactivate
)

// jobWarning is a warning before eviction (a preemption notice) a running job reacts to, as a
// training loop that reads the deadline would: it starts a checkpoint at once and, when the
// checkpoint completes before the deadline, answers (checkpoint-done), so that it is evicted then.
type jobWarning struct {
	*policy.Warns
	// checkpointAt is when the checkpoint started at the warning completes; 0: the job does not
	// checkpoint within the warning (no checkpointDuration, or it would not finish in time).
	checkpointAt time.Duration
	// saved: the checkpoint completed and the job said so.
	saved bool
}

// Counts are what a run counts of the units' warnings: by counter (policy.Warns), given and
// endedEarly.
type Counts map[string]map[string]int

// newCounts has a zero count of every unit's warnings.
func newCounts() Counts {
	c := Counts{}
	for _, w := range warnings() {
		c[w.Counter] = map[string]int{"given": 0, "endedEarly": 0}
	}
	return c
}

func (c Counts) add(o Counts) {
	// Every Counts has every unit's counters (newCounts).
	for counter, counts := range o {
		for k, n := range counts {
			c[counter][k] += n
		}
	}
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
		spec: spec,
		key:  types.NamespacedName{Namespace: spec.Namespace, Name: spec.Name},
		uid:  uid,
		res:  WorkloadResult{Preemptions: map[string]int{}, Counts: newCounts()},
	}
}

func (j *job) arrived(now time.Duration) {
	j.state, j.since = pending, now
}

func (j *job) admitted(now time.Duration) {
	j.close(now)
	j.state, j.since = running, now
	j.warning = nil
	j.res.Admissions++
	j.finishAt = timeutil.Add(now, j.spec.Duration-j.progress)
}

// evicted stops a running job and returns the run time the eviction threw away.
func (j *job) evicted(now time.Duration, reason string) time.Duration {
	if j.state != running {
		return 0
	}
	j.close(now)
	kept, lost := j.spec.checkpoints().split(now - j.since)
	if n := j.warning; n != nil && n.saved {
		// The checkpoint begun at the warning kept the work up to it, and counts as progress as
		// the periodic ones do; only what ran after it completed is lost.
		kept = max(kept, min(n.checkpointAt-j.since, now-j.since))
		lost = now - j.since - kept
		j.res.Counts.add(Counts{n.Counter: {"endedEarly": 1}})
	}
	j.warning = nil
	j.progress += kept
	j.res.Lost += lost
	j.state, j.since = pending, now
	j.res.Preemptions[reason]++
	return lost
}

// checkpointing is how a job saves its progress.
type checkpointing struct {
	// continuous: every moment of run time is kept (checkpointed: true).
	continuous bool
	// every is the run time between checkpoints, each of which takes take; 0: no checkpoints.
	every, take time.Duration
}

func (s WorkloadSpec) checkpoints() checkpointing {
	return checkpointing{continuous: s.Checkpointed, every: s.CheckpointInterval, take: s.CheckpointDuration}
}

// split divides the run time of one admission, ended by an eviction, into what the last completed
// checkpoint kept and what is lost. A checkpoint starts after every `every` of work and completes
// `take` later; time spent checkpointing counts as progress (a job's duration is its uninterrupted
// run time, checkpoints included), so a job resumes at the position of that checkpoint. A
// checkpoint still being written at the eviction is lost with the work before it.
func (c checkpointing) split(ran time.Duration) (kept, lost time.Duration) {
	switch {
	case c.continuous:
		return ran, 0
	case c.every <= 0:
		return 0, ran
	}
	period := c.every + c.take
	kept = ran / period * period
	return kept, ran - kept
}

// warned starts the job's reaction to a warning of u given at now until deadline: a job that
// declares checkpointDuration starts a checkpoint, which saves its work only if it completes
// before the deadline. A continuously checkpointed job has nothing to save.
func (j *job) warned(u *policy.Warns, now, deadline time.Duration) {
	if j.state != running {
		return
	}
	j.res.Counts.add(Counts{u.Counter: {"given": 1}})
	j.warning = &jobWarning{Warns: u}
	if take := j.spec.CheckpointDuration; take > 0 && !j.spec.Checkpointed && timeutil.Add(now, take) < deadline {
		j.warning.checkpointAt = now + take
	}
}

func (j *job) finished(now time.Duration) {
	j.warning = nil
	j.close(now)
	j.state, j.since, j.res.Finished, j.res.FinishedAt = done, now, true, now
}

// close ends the current interval at now.
func (j *job) close(now time.Duration) {
	if j.state != pending && j.state != running {
		return
	}
	if d := now - j.since; d > 0 {
		j.res.Intervals = append(j.res.Intervals, Interval{From: j.since, To: now, Running: j.state == running})
		if j.state == running {
			j.res.Admitted += d
		} else {
			j.res.TotalWait += d
			j.res.LongestWait = max(j.res.LongestWait, d)
		}
	}
}

// Interval is a span of a workload's life: waiting (pending) or holding quota (running).
type Interval struct {
	From    time.Duration
	To      time.Duration
	Running bool `json:"admitted"`
}
