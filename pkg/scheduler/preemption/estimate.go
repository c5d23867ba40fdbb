package preemption

import (
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Policy is the victim policy the preemptor decides with: the admission estimate asks it the
// same questions.
func (p *Preemptor) Policy() *policy.Policy { return p.policy }
