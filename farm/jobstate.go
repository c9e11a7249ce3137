package farm

import "github.com/farm-hpc/farm/backend"

// runsCases reports whether a job in state s may be running a case right
// now: a pending job — one never started, or one requeued to start again —
// is running none, so a case its earlier run left open was interrupted.
func runsCases(s backend.JobState) bool { return s == backend.Running }
