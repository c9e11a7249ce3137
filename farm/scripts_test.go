package farm

import (
	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/sge"
	"github.com/farm-hpc/farm/slurm"
)

// anyScripts are the job-script dialects of the local engine as farm's
// registry gives them: Slurm's, then Grid Engine's.
var anyScripts = []backend.Script{slurm.Script{}, sge.Script{}}

// scriptsOf are the dialects of the engine whose directive is directive
// (slurm.Directive, sge.Directive; "": the local engine's).
func scriptsOf(directive string) []backend.Script {
	switch directive {
	case slurm.Directive:
		return []backend.Script{slurm.Script{}}
	case sge.Directive:
		return []backend.Script{sge.Script{}}
	}
	return anyScripts
}

// scriptOf is the one dialect whose directive is directive.
func scriptOf(directive string) backend.Script { return scriptsOf(directive)[0] }
