package sge

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// Self implements backend.Backend inside a Grid Engine job. Its ID is
// "$JOB_ID.$SGE_TASK_ID" in an array task, else $JOB_ID; Restart is 1 when
// $RESTARTED says the job was restarted (Grid Engine does not count). Its
// end time is its task's start plus its h_rt, from `qstat -j $JOB_ID -xml`
// (no variable tells it), unless req.NoEnd; the zero time if the job has no
// h_rt or qstat does not tell.
func (b *Backend) Self(ctx context.Context, req backend.SelfRequest) (backend.Self, error) {
	env := req.Env
	num := strings.TrimSpace(env("JOB_ID"))
	if num == "" {
		return backend.Self{}, errors.New("JOB_ID is not set: not inside a Grid Engine job")
	}
	if !jobIDRe.MatchString(num) {
		return backend.Self{}, fmt.Errorf("JOB_ID=%q: not a job ID", num)
	}
	id, task := num, strings.TrimSpace(env("SGE_TASK_ID"))
	if task != "" && task != "undefined" {
		if !jobIDRe.MatchString(task) {
			return backend.Self{}, fmt.Errorf("SGE_TASK_ID=%q: not an array task index", task)
		}
		id = num + "." + task
	}
	s := backend.Self{ID: id, Alloc: selfAlloc(env)}
	if f := env("PE_HOSTFILE"); f != "" {
		if b, err := os.ReadFile(f); err == nil {
			s.Alloc = withPENodes(s.Alloc, string(b), env("HOSTNAME"))
		}
	}
	if strings.TrimSpace(env("RESTARTED")) == "1" {
		s.Restart = 1
	}
	if req.NoEnd {
		return s, nil
	}
	out, err := b.run(ctx, nil, false, "qstat", "-xml", "-j", num)
	if err == nil {
		s.End = selfEnd(out, task)
	}
	return s, nil
}

// jobXML is the part of `qstat -j ID -xml` that Self reads.
type jobXML struct {
	Resources []struct {
		Name   string  `xml:"CE_name"`
		Double float64 `xml:"CE_doubleval"`
	} `xml:"djob_info>element>JB_hard_resource_list>qstat_l_requests"`
	Tasks []struct {
		Number string `xml:"JAT_task_number"`
		Start  int64  `xml:"JAT_start_time"`
	} `xml:"djob_info>element>JB_ja_tasks>ulong_sublist"`
}

// selfEnd reads the end of task (a plain job's only task if task is not a
// number) from `qstat -j ID -xml`: its start (Unix seconds) plus h_rt.
func selfEnd(out, task string) time.Time {
	var j jobXML
	if err := xml.Unmarshal([]byte(out), &j); err != nil {
		return time.Time{}
	}
	var limit float64
	for _, r := range j.Resources {
		if r.Name == "h_rt" {
			limit = r.Double
		}
	}
	if limit <= 0 || limit > float64(math.MaxInt64/int64(time.Second)) {
		return time.Time{}
	}
	for _, t := range j.Tasks {
		if (t.Number == task || len(j.Tasks) == 1 && !jobIDRe.MatchString(task)) && t.Start > 0 {
			return time.Unix(t.Start, 0).Add(time.Duration(limit * float64(time.Second)))
		}
	}
	return time.Time{}
}

// selfAlloc is what the job was given, from its environment:
//
//   - CPUs: NSLOTS (the slots of a parallel environment, 1 without one);
//   - GPUs: SGE_HGR_gpu (Univa/Altair Grid Engine's RSMAP of a resource
//     named gpu: "0 1"), else CUDA_VISIBLE_DEVICES as the site's prolog or
//     load sensor set it (qsub -V does not pass the submitter's: submitEnv);
//   - memory: not told (h_vmem is per slot and site-defined): unknown.
func selfAlloc(env func(string) string) backend.Alloc {
	var a backend.Alloc
	a.CPUs = int(backend.Positive(env("NSLOTS"), math.MaxInt32))
	if g := strings.Join(strings.Fields(env("SGE_HGR_gpu")), ","); g != "" {
		a.GPUs = backend.GPUList(g, true)
	}
	if a.GPUs == nil {
		a.GPUs = backend.GPUList(env("CUDA_VISIBLE_DEVICES"), true)
	}
	return a
}

// withPENodes adds the nodes of a parallel environment's job of several
// hosts to a: $PE_HOSTFILE's lines ("host slots queue processors"), the
// host the job script runs on (here, matched by its short name) first,
// whose slots become a's CPUs. a as it was for a job of one host, or a
// file that does not read.
func withPENodes(a backend.Alloc, hostfile, here string) backend.Alloc {
	var nodes []backend.Node
	for _, line := range strings.Split(hostfile, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n := int(backend.Positive(f[1%len(f)], math.MaxInt32))
		if len(f) < 2 || n < 1 {
			return a
		}
		nodes = append(nodes, backend.Node{Name: f[0], CPUs: n})
	}
	if len(nodes) < 2 {
		return a
	}
	short := func(h string) string { s, _, _ := strings.Cut(h, "."); return s }
	for i, n := range nodes {
		if here != "" && short(n.Name) == short(here) {
			copy(nodes[1:i+1], nodes[:i])
			nodes[0] = n
			break
		}
	}
	a.CPUs, a.Nodes = nodes[0].CPUs, nodes
	return a
}
