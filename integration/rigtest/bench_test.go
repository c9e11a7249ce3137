package rigtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/integration/harness"
)

// BenchmarkRigClaims measures claims per second farm-wide on the rig: a
// farm of trivial cases (true) on one volume, its meta-jobs spread over the
// 4 nodes (4, 8 and 16 of them: 1, 2 and 4 a node), from the first case's
// start to the last one's end. On the Gluster volumes it also counts the
// file operations the bricks served per case (gluster volume profile; one
// brick of the two replicas, the other sees the same writes). "ext4" is the
// rig's nodes sharing this machine's local filesystem: no network at all.
//
//	make bench-cluster   (or: go test -run '^$' -bench Rig -benchtime 1x ./integration/rigtest/)
func BenchmarkRigClaims(b *testing.B) {
	if theRig == nil {
		b.Skip("CLUSTER BENCHMARKS SKIPPED: " + why)
	}
	cases := 600
	if v, err := strconv.Atoi(os.Getenv("FARM_RIG_BENCH_CASES")); err == nil && v > 0 {
		cases = v
	}
	for _, profile := range []string{"ext4", "coherent", "latency"} {
		for _, jobs := range []int{4, 8, 16} {
			b.Run(fmt.Sprintf("%s/jobs=%d", profile, jobs), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					benchClaims(b, profile, jobs, cases)
				}
			})
		}
	}
}

func benchClaims(b *testing.B, profile string, jobs, cases int) {
	b.StopTimer()
	base := b.TempDir()
	vol := ""
	if profile != "ext4" {
		base = fmt.Sprintf("%s/%s", theRig.mnt, profile)
		vol = "farm-" + profile
	}
	dir, err := os.MkdirTemp(base, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dir += "/farm"
	harness.NewFarmAt(b, dir, harness.Repeat("true", cases), "0-01:00")
	largeFarmConfig(b, dir) // the claims are measured, not mkdir

	if vol != "" {
		// (A profile left on by hand is fine: it is cleared below.)
		if out, err := exec.Command("gluster", "--mode=script", "volume", "profile", vol, "start").CombinedOutput(); err != nil && !strings.Contains(string(out), "already started") {
			b.Fatalf("gluster volume profile %s start: %v\n%s", vol, err, out)
		}
		defer gluster(b, "volume", "profile", vol, "stop")
		gluster(b, "volume", "profile", vol, "info", "clear")
	}
	b.StartTimer()
	harness.Must(b, dir, "submit", strconv.Itoa(jobs))
	harness.Must(b, dir, "wait", "--timeout", "30m")
	b.StopTimer()
	rec := harness.ReadRecords(b, dir)
	for id := int64(1); id <= int64(cases); id++ {
		if rec.Starts[id] != 1 || rec.Ends[id] != 1 {
			b.Fatalf("case %d: %d starts, %d ends; want one run", id, rec.Starts[id], rec.Ends[id])
		}
	}
	secs := rec.Last - rec.First
	b.ReportMetric(float64(cases)/secs, "claims/s")
	if vol != "" {
		fops := brickFops(b, vol)
		var total int64
		var names []string
		for f, n := range fops {
			total += n
			names = append(names, f)
		}
		sort.Slice(names, func(i, j int) bool { return fops[names[i]] > fops[names[j]] })
		var top []string
		for _, f := range names[:min(8, len(names))] {
			top = append(top, fmt.Sprintf("%s %.1f", f, float64(fops[f])/float64(cases)))
		}
		b.ReportMetric(float64(total)/float64(cases), "fops/case")
		b.Logf("%s, %d jobs: per case %s", profile, jobs, strings.Join(top, ", "))
	}
	time.Sleep(time.Second) // let the jobs' ends reach Slurm before the next farm
}

func gluster(b *testing.B, args ...string) string {
	b.Helper()
	out, err := exec.Command("gluster", append([]string{"--mode=script"}, args...)...).CombinedOutput()
	if err != nil {
		b.Fatalf("gluster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var fopLine = regexp.MustCompile(`^\s*[0-9.]+\s+[0-9.]+ [nu]s\s+[0-9.]+ [nu]s\s+[0-9.]+ [nu]s\s+([0-9]+)\s+([A-Z]+)\s*$`)

// brickFops reads 'gluster volume profile VOL info cumulative' and returns
// the number of calls of each file operation the first brick served.
func brickFops(b *testing.B, vol string) map[string]int64 {
	out := gluster(b, "volume", "profile", vol, "info", "cumulative")
	fops := map[string]int64{}
	bricks := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "Brick:") {
			bricks++
			continue
		}
		// "      0.64 1394919.65 ns   70135.00 ns 12460394.00 ns   1255   LINK"
		if m := fopLine.FindStringSubmatch(line); m != nil && bricks == 1 {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			fops[m[2]] += n
		}
	}
	if len(fops) == 0 {
		b.Fatalf("no file operations in gluster volume profile %s info:\n%s", vol, out)
	}
	return fops
}
