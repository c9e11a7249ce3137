package layout

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

func TestStatusFiles(t *testing.T) {
	for _, tc := range []struct {
		job     string
		restart int
		name    string
	}{
		{"17", 0, "status.17"},
		{"17", 2, "status.17.r2"},
		{"123_4", 0, "status.123_4"},
		{"123_4", 1, "status.123_4.r1"},
	} {
		if got := StatusFile(tc.job, tc.restart); got != tc.name {
			t.Errorf("StatusFile(%q, %d) = %q, want %q", tc.job, tc.restart, got, tc.name)
		}
		job, r, ok := ParseStatusFile(tc.name)
		if !ok || job != tc.job || r != tc.restart {
			t.Errorf("ParseStatusFile(%q) = %q, %d, %t", tc.name, job, r, ok)
		}
	}
	for _, bad := range []string{"status.", "status.17.tmp123", "status.17.r0", "status.17.rx", "status.17.r01", "status.17.r+1", "table.dat", "status.17.tmp"} {
		if job, r, ok := ParseStatusFile(bad); ok {
			t.Errorf("ParseStatusFile(%q) = %q, %d, true; want not a status file", bad, job, r)
		}
	}
}

// TestImportsNothingOfFarms keeps layout at the bottom: every package may
// name a farm's files through it.
func TestImportsNothingOfFarms(t *testing.T) {
	files, err := parser.ParseDir(token.NewFileSet(), ".", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range files {
		for name, f := range pkg.Files {
			for _, imp := range f.Imports {
				if strings.Contains(imp.Path.Value, ".") {
					t.Errorf("%s imports %s: layout imports the standard library only", name, imp.Path.Value)
				}
			}
		}
	}
}

func TestCaseOutput(t *testing.T) {
	for _, c := range []struct {
		status string
		loop   int
		stderr bool
		want   string
	}{
		{"status.123", 1, false, "cases.123.loop1.stdout"},
		{"status.123", 12, true, "cases.123.loop12.stderr"},
		{StatusFile("77", 2), 3, false, "cases.77.r2.loop3.stdout"},
		{"status.123", 0, false, ""},
		{"table.dat", 1, false, ""},
		{"status.", 1, false, ""},
	} {
		if got := CaseOutput(c.status, c.loop, c.stderr); got != c.want {
			t.Errorf("CaseOutput(%q, %d, %v) = %q, want %q", c.status, c.loop, c.stderr, got, c.want)
		}
	}
}
