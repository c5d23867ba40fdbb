package policy

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Descriptors that a feature's plugin hands the readers that show or play it: the kubectl plugin
// (Column, Shield) and the simulator (Warns). Each reader declares the interface it asks a plugin
// for, next to itself; the victim policy reads none of these.

// Warns is how a unit warns a running workload before its eviction. A job that can save its
// work starts saving it when warned and, once saved, writes Answer on its Workload to be evicted
// sooner.
type Warns struct {
	// Given is the warning newly written on wl since its version old (nil: none); nil when wl
	// carries none that old did not. An error: what wl carries is not a warning the manager gave.
	Given func(old, wl *kueue.Workload) (*Warning, error)
	// Answer is the annotation a warned job sets to "true" once its work is saved.
	Answer string
	// Event names the event of a warning given; Says tells it in a timeline, given the offset of
	// its deadline, the preemptor ("": unknown) and the preemption reason.
	Event string
	Says  func(until, by, reason string) string
	// Counter names the warnings' counts in a report (given, ended early: answered before the
	// eviction); Title heads them.
	Counter, Title string
	// Early and Late are how an eviction ends a warning: after the job's answer, or without one.
	Early, Late Ending
}

// Warning is one warning given to a running workload.
type Warning struct {
	// Until is when it is evicted at the latest, for preemptor By and Reason.
	Until  time.Time
	By     types.UID
	Reason string
}

// Ending is how an eviction ended a warning: its outcome's name, and its words in a timeline.
type Ending struct {
	Outcome, Words string
}

// Column is a unit's column in the kubectl plugin's table of workloads holding quota.
type Column struct {
	// Header is the column's title.
	Header string
	// Label names the value in a cell, after the instant.
	Label string
	// Cell is c's value (empty: none) and the instant it leads to (zero: none).
	Cell func(c *Candidate) (value string, from time.Time)
}

// Shield is a protection a unit gives a running candidate, as the kubectl plugin shows it.
type Shield struct {
	// Kind names the protection ("toleration").
	Kind string
	// Active: it protects the candidate at now, from some preemptor.
	Active bool
	// Until is when it ends; zero when it lasts as long as the candidate runs (Forever) or is
	// not known yet.
	Until   time.Time
	Forever bool
	// Source says what set it, for a person.
	Source string
}
