package policy

import (
	"fmt"
	"time"
)

// The settings a feature reads off the queues of a cohort path, each inherited from the next
// queue up unless set (min-runtimes, notice periods), and where a resolved value came from.

// Setting is a duration that may be unset. Unset inherits from the next queue up; a set 0s stops
// the walk and means no protection.
type Setting struct {
	Set   bool
	Value time.Duration
}

// Set returns a Setting holding d.
func Set(d time.Duration) Setting { return Setting{Set: true, Value: d} }

// Source says which setting a resolved value came from.
type Source struct {
	// Field and Value are the setting as written: "reclaimMinRuntime", "10m0s".
	Field, Value string
	// Kind and Name are the queue that set it ("ClusterQueue" or "Cohort"); both empty for the
	// manager configuration's default.
	Kind, Name string
	// Note, when set, says what decided instead of a setting ("a turn always gets the notice").
	Note string
}

// QueueSource is a setting found on a queue of a path.
func QueueSource(field string, value any, kind, name string) Source {
	return Source{Field: field, Value: fmt.Sprint(value), Kind: kind, Name: name}
}

// DefaultSource is the manager configuration's default for field.
func DefaultSource(field string, value any) Source {
	return Source{Field: field, Value: fmt.Sprint(value)}
}

// Default reports whether the value is the manager configuration's default, no queue on the path
// setting it: readers that do not know those defaults must say so.
func (s Source) Default() bool { return s.Note == "" && s.Field != "" && s.Kind == "" }

// Where names where the value came from: "Cohort team-a", "the manager configuration", or the note.
func (s Source) Where() string {
	switch {
	case s.Note != "":
		return s.Note
	case s.Kind != "":
		return s.Kind + " " + s.Name
	case s.Field != "":
		return "the manager configuration"
	}
	return ""
}

func (s Source) String() string {
	if s.Note != "" || s.Field == "" {
		return s.Note
	}
	return fmt.Sprintf("%s %s from %s", s.Field, s.Value, s.Where())
}
