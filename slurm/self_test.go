package slurm

import (
	"context"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/backend"
	"github.com/google/go-cmp/cmp"
)

// TestSelfAlloc: what a job was given, from the variables Slurm sets in
// it; a value that does not read is ignored (0, nil), never an error.
func TestSelfAlloc(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want backend.Alloc
	}{
		{"nothing", nil, backend.Alloc{}},
		{"cpus and memory per node", map[string]string{"SLURM_CPUS_ON_NODE": "8", "SLURM_MEM_PER_NODE": "16000"}, backend.Alloc{CPUs: 8, MemMB: 16000}},
		{"memory per CPU", map[string]string{"SLURM_CPUS_ON_NODE": "4", "SLURM_MEM_PER_CPU": "2048"}, backend.Alloc{CPUs: 4, MemMB: 8192}},
		{"per node wins", map[string]string{"SLURM_CPUS_ON_NODE": "4", "SLURM_MEM_PER_NODE": "1000", "SLURM_MEM_PER_CPU": "2048"}, backend.Alloc{CPUs: 4, MemMB: 1000}},
		{"memory per CPU, CPUs unknown", map[string]string{"SLURM_MEM_PER_CPU": "2048"}, backend.Alloc{}},
		{"memory per GPU", map[string]string{"SLURM_CPUS_ON_NODE": "2", "SLURM_JOB_GPUS": "2,3", "SLURM_MEM_PER_GPU": "10000"}, backend.Alloc{CPUs: 2, GPUs: []string{"2", "3"}, MemMB: 20000}},
		{"job GPUs", map[string]string{"SLURM_JOB_GPUS": "0,1"}, backend.Alloc{GPUs: []string{"0", "1"}}},
		{"one node", map[string]string{"SLURM_CPUS_ON_NODE": "4", "SLURM_JOB_NODELIST": "node3", "SLURM_JOB_CPUS_PER_NODE": "4"}, backend.Alloc{CPUs: 4, Nodes: []backend.Node{{Name: "node3", CPUs: 4}}}},
		{"nodes", map[string]string{"SLURM_CPUS_ON_NODE": "4", "SLURM_JOB_NODELIST": "node[1-3]", "SLURM_JOB_CPUS_PER_NODE": "4(x2),2", "SLURMD_NODENAME": "node1"},
			backend.Alloc{CPUs: 4, Nodes: []backend.Node{{Name: "node1", CPUs: 4}, {Name: "node2", CPUs: 4}, {Name: "node3", CPUs: 2}}}},
		{"nodes, the batch host first", map[string]string{"SLURM_CPUS_ON_NODE": "2", "SLURM_NODELIST": "a,b[01-02]", "SLURM_JOB_CPUS_PER_NODE": "4,4,2", "SLURMD_NODENAME": "b02"},
			backend.Alloc{CPUs: 2, Nodes: []backend.Node{{Name: "b02", CPUs: 2}, {Name: "a", CPUs: 4}, {Name: "b01", CPUs: 4}}}},
		{"nodes, CPUs that do not match", map[string]string{"SLURM_JOB_NODELIST": "node[1-3]", "SLURM_JOB_CPUS_PER_NODE": "4(x2)"}, backend.Alloc{}},
		{"nodes, a list that does not read", map[string]string{"SLURM_JOB_NODELIST": "node[1-", "SLURM_JOB_CPUS_PER_NODE": "4(x2)"}, backend.Alloc{}},
		// Confined to its devices, the job sees them numbered from 0.
		{"job GPUs as CUDA names them", map[string]string{"SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"}, backend.Alloc{GPUs: []string{"0", "1"}}},
		{"job GPUs by UUID", map[string]string{"SLURM_JOB_GPUS": "5", "CUDA_VISIBLE_DEVICES": "GPU-8f6c1e2a-1b2c-3d4e-5f60-718293a4b5c6"}, backend.Alloc{GPUs: []string{"GPU-8f6c1e2a-1b2c-3d4e-5f60-718293a4b5c6"}}},
		{"CUDA lists other GPUs", map[string]string{"SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0"}, backend.Alloc{GPUs: []string{"2", "3"}}},
		{"CUDA alone", map[string]string{"CUDA_VISIBLE_DEVICES": "1, 3"}, backend.Alloc{GPUs: []string{"1", "3"}}},
		{"MIG instances", map[string]string{"CUDA_VISIBLE_DEVICES": "MIG-GPU-8f6c1e2a/1/0,MIG-0e2f"}, backend.Alloc{GPUs: []string{"MIG-GPU-8f6c1e2a/1/0", "MIG-0e2f"}}},
		{"step GPUs", map[string]string{"SLURM_STEP_GPUS": "7"}, backend.Alloc{GPUs: []string{"7"}}},
		{"step GPUs, CUDA saying NoDevFiles", map[string]string{"SLURM_STEP_GPUS": "7", "CUDA_VISIBLE_DEVICES": "NoDevFiles"}, backend.Alloc{GPUs: []string{"7"}}},
		{"leading zeros and blanks", map[string]string{"SLURM_CPUS_ON_NODE": " 08\n", "SLURM_JOB_GPUS": "00,01", "SLURM_MEM_PER_NODE": "0100"}, backend.Alloc{CPUs: 8, GPUs: []string{"0", "1"}, MemMB: 100}},
		// Garbage: ignored.
		{"garbage", map[string]string{
			"SLURM_CPUS_ON_NODE": "eight", "SLURM_JOB_GPUS": "0,,1", "CUDA_VISIBLE_DEVICES": "NoDevFiles",
			"SLURM_STEP_GPUS": "0,0", "SLURM_MEM_PER_NODE": "16G",
		}, backend.Alloc{}},
		{"garbage numbers", map[string]string{
			"SLURM_CPUS_ON_NODE": "-4", "SLURM_JOB_GPUS": "-1", "CUDA_VISIBLE_DEVICES": "GPU-", "SLURM_MEM_PER_NODE": "0",
			"SLURM_MEM_PER_CPU": "99999999999999999999",
		}, backend.Alloc{}},
		{"too many CPUs", map[string]string{"SLURM_CPUS_ON_NODE": "4294967296", "SLURM_MEM_PER_CPU": "100"}, backend.Alloc{}},
		{"memory per CPU overflows", map[string]string{"SLURM_CPUS_ON_NODE": "1024", "SLURM_MEM_PER_CPU": "9223372036854775807"}, backend.Alloc{CPUs: 1024}},
		{"GPU index beyond 32 bits", map[string]string{"SLURM_JOB_GPUS": "4294967296"}, backend.Alloc{}},
		{"CUDA's -1 (no GPU)", map[string]string{"CUDA_VISIBLE_DEVICES": "-1"}, backend.Alloc{}},
		{"CUDA's empty list", map[string]string{"CUDA_VISIBLE_DEVICES": ""}, backend.Alloc{}},
		{"bad UUID", map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-abc;rm"}, backend.Alloc{}},
	} {
		env := func(k string) string { return tc.env[k] }
		if diff := cmp.Diff(tc.want, selfAlloc(env)); diff != "" {
			t.Errorf("%s: Alloc (-want +got):\n%s", tc.name, diff)
		}
		// Self gives it, as it gives the ID.
		full := map[string]string{"SLURM_JOB_ID": "42", "SLURM_JOB_END_TIME": "1800000000"}
		for k, v := range tc.env {
			full[k] = v
		}
		s, err := New("").Self(context.Background(), backend.SelfRequest{Env: func(k string) string { return full[k] }})
		if err != nil || s.ID != "42" || !cmp.Equal(s.Alloc, tc.want) {
			t.Errorf("%s: Self = %+v, %v; want Alloc %+v", tc.name, s, err, tc.want)
		}
	}
}

// FuzzSelfAlloc: no environment makes selfAlloc panic, or give a
// negative or an empty GPU name.
func FuzzSelfAlloc(f *testing.F) {
	f.Add("8", "0,1", "GPU-a,GPU-b", "", "16000", "", "")
	f.Add("x", ",", "NoDevFiles", "0,0", "-1", "99999999999999999999", "7")
	f.Fuzz(func(t *testing.T, cpus, job, cuda, step, node, perCPU, perGPU string) {
		env := map[string]string{"SLURM_CPUS_ON_NODE": cpus, "SLURM_JOB_GPUS": job, "CUDA_VISIBLE_DEVICES": cuda,
			"SLURM_STEP_GPUS": step, "SLURM_MEM_PER_NODE": node, "SLURM_MEM_PER_CPU": perCPU, "SLURM_MEM_PER_GPU": perGPU}
		a := selfAlloc(func(k string) string { return env[k] })
		if a.CPUs < 0 || a.MemMB < 0 {
			t.Fatalf("%+v from %q", a, env)
		}
		for _, g := range a.GPUs {
			if g == "" || strings.ContainsAny(g, ", \t\n") {
				t.Fatalf("GPU %q from %q", g, env)
			}
		}
	})
}

// TestSubmitEnvDropsAllocation: a job submitted from inside another does
// not inherit what Slurm told the submitter it was given.
func TestSubmitEnvDropsAllocation(t *testing.T) {
	base := []string{"SLURM_JOB_GPUS=0,1", "SLURM_STEP_GPUS=0", "SLURM_GPUS_ON_NODE=2", "SLURM_CPUS_ON_NODE=8",
		"SLURM_JOB_NODELIST=n[1-2]", "SLURM_JOB_CPUS_PER_NODE=2(x2)", "SLURM_JOB_NUM_NODES=2",
		"SLURM_MEM_PER_NODE=1000", "SLURM_MEM_PER_CPU=100", "SLURM_MEM_PER_GPU=10", "SLURM_JOB_ID=5", "USERVAR=kept", "CUDA_VISIBLE_DEVICES=0,1"}
	got := submitEnv(base, []string{"FARM_RUN=2"})
	want := []string{"SLURM_JOB_ID=5", "USERVAR=kept", "CUDA_VISIBLE_DEVICES=0,1", "FARM_RUN=2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("submit environment (-want +got):\n%s", diff)
	}
}
