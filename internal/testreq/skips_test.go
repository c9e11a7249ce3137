package testreq

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// allowedSkips are the skips that need no FARM_REQUIRE_* guard, by file
// and function, each with why CI may take it or never does (README.md).
var allowedSkips = map[string]string{
	"backend/backendtest/backendtest.go:testTimeLimit":                             "an engine that takes its run-time from the job script (Slurm): the integration tests check it",
	"integration/pack_test.go:TestPackMixedCPUs":                                   "needs 2 CPUs, which .ci/run cannot give a machine",
	"integration/pack_test.go:TestPackPartialNeeds":                                "needs 2 CPUs, which .ci/run cannot give a machine",
	"integration/resubmit_test.go:TestLocalRuntimeAwareExitAvoidsInterruptedCases": "testing.Short(): CI does not pass -short",
	"integration/ops_bench_test.go:BenchmarkClaimOps":                              "a benchmark (strace), which CI does not run",
	"integration/idleops_bench_test.go:BenchmarkIdleOps":                           "a benchmark (strace), which CI does not run",
	"integration/rigtest/bench_test.go:BenchmarkRigClaims":                         "a benchmark (the rig), which CI does not run",
	"integration/rigtest/thousand_test.go:BenchmarkRigThousand":                    "a benchmark (the rig), which CI does not run",
	"integration/rigtest/primitives_test.go:TestDHTPrimitivesMeasure":              "an opt-in measurement (FARM_RIG_PRIMITIVES=1)",
	"casetable/simmutants_test.go:TestSimMutants":                                  "an opt-in run (make sim-mutants, SIM_MUTANTS=1: every past defect with the make-test budget, minutes); make test replays their catching seeds (TestSimRegressions)",
}

// TestNoSkipWithoutAGuard: every Skip, Skipf and SkipNow of farm's code
// outside this package is one of allowedSkips; any other skip goes through
// Skip here, so that a FARM_REQUIRE_* variable turns it into a failure in
// CI. A new skip CI must not take cannot be added silently.
func TestNoSkipWithoutAGuard(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var bad []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" || p == filepath.Join(root, "internal", "testreq") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "testreq" {
					return true
				}
				switch sel.Sel.Name {
				case "Skip", "Skipf", "SkipNow":
					key := filepath.ToSlash(rel) + ":" + fd.Name.Name
					seen[key] = true
					if _, ok := allowedSkips[key]; !ok {
						bad = append(bad, fset.Position(call.Pos()).String())
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: a skip without a FARM_REQUIRE_* guard: call testreq.Skip, or add it to allowedSkips with why CI may take it", b)
	}
	for k := range allowedSkips {
		if !seen[k] {
			t.Errorf("allowedSkips names %s, which no longer skips: remove it", k)
		}
	}
}
