package main

import (
	"os"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// cpuShares is where a manager's CPU profile says its time went.
type cpuShares struct {
	// Total is every sample of the profile.
	Total time.Duration
	// Scheduler: samples with a method of either scheduler's Scheduler type on the stack (its cycle,
	// and the goroutines that write admissions); the preemptor runs inside them.
	Scheduler time.Duration
	// Waker: samples in our window and protection waker, which runs next to either scheduler.
	Waker time.Duration
}

// Function name prefixes, the same for upstream's package and ours.
const (
	schedulerFrame = "/pkg/scheduler.(*Scheduler)."
	wakerFrame     = "/pkg/queuesettings.(*Waker)."
)

// readCPUShares sums a CPU profile's samples by the frames above.
func readCPUShares(path string) (cpuShares, error) {
	f, err := os.Open(path)
	if err != nil {
		return cpuShares{}, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return cpuShares{}, err
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	var s cpuShares
	if idx < 0 {
		return s, nil
	}
	for _, sample := range p.Sample {
		d := time.Duration(sample.Value[idx])
		s.Total += d
		var inScheduler, inWaker bool
		for _, loc := range sample.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				name := line.Function.Name
				inScheduler = inScheduler || strings.Contains(name, schedulerFrame)
				inWaker = inWaker || strings.Contains(name, wakerFrame)
			}
		}
		if inScheduler {
			s.Scheduler += d
		}
		if inWaker {
			s.Waker += d
		}
	}
	return s, nil
}
