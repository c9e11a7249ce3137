// Package faulttrials holds the randomised fault trials of issue 11, run
// by 'make faults' (long) and 'make test' (a short subset): meta-jobs
// killed with kill -9 on the local backend and on the real Slurm, at random
// moments and inside their claim commits, then resubmitted to completion;
// and meta-jobs frozen (SIGSTOP) before, inside and after a claim commit
// while the others finish the farm. They run with the farm's default
// config, rescue within the run on (rescue_test.go: what they count of
// it), but for the rescue-off twins that say why they are kept. Each trial
// has a seed; a failing trial prints it and the one command that reruns
// it. RELIABILITY.md (at the
// repository's root) holds the figures of a 'make faults' run and what
// each trial counts.
//
// The environment sets the size of a run:
//
//	FARM_FAULT_TRIALS        local kill -9 trials, with rescue on and with
//	                         it off (default 12 each)
//	FARM_FAULT_SLURM_TRIALS  Slurm kill trials (default 3)
//	FARM_FAULT_FROZEN_TRIALS frozen-holder trials (default 12; casetable's
//	                         stalled-claimer trials per point, default 20)
//	FARM_FAULT_LANES_TRIALS  kill -9, frozen-holder and frozen-across-resubmit
//	                         trials on runs with lanes, FARM_CLAIM_LANES=2-4
//	                         (default 6 each)
//	FARM_FAULT_SEED          run only the trial of this seed
//	FARM_FAULT_BASE          the first seed of a run (default from the clock)
//	FARM_FAULT_FIGURES       append one summary line per test to this file
//	FARM_FAULT_PARALLEL      trials of a test at once (default: go test's
//	                         -parallel, twice that with rescue on)
//	FARM_FAULT_DIAGNOSE=1    log every trial's job outputs and status
//	                         files, not only a failed one's
package faulttrials
