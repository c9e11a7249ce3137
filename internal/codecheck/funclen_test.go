// Package codecheck holds tests of farm's code as text: rules that go vet
// and gofmt do not check.
package codecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Function lengths (issue 23): none over maxLines; none over reasonLines
// without a reason written above it, a doc comment that says "Over 80
// lines:" and why.
const (
	maxLines    = 100
	reasonLines = 80
)

// longAllowed are the functions over these limits that are not yet
// shortened, by file and name, with why.
var longAllowed = map[string]string{
	"integration/rigtest/primitives_test.go:racer":        "runs only on the cluster rig (make race-dht); to be split where it can be run",
	"integration/rigtest/primitives_test.go:rig.race":     "runs only on the cluster rig (make race-dht); to be split where it can be run",
	"integration/rigtest/primitives_test.go:rig.readBack": "runs only on the cluster rig (make race-dht); to be split where it can be run",
}

// TestFunctionLengths: no function of farm's code (tests included) is over
// 100 lines, and none over 80 without "Over 80 lines:" in its doc comment,
// but those of longAllowed.
func TestFunctionLengths(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := map[string]bool{} // longAllowed's functions still over reasonLines
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n <= reasonLines {
				continue
			}
			key := filepath.ToSlash(rel) + ":" + funcName(fd)
			if _, ok := longAllowed[key]; ok {
				seen[key] = true
				continue
			}
			switch {
			case n > maxLines:
				t.Errorf("%s: %d lines, over %d: split it", key, n, maxLines)
			case fd.Doc == nil || !strings.Contains(fd.Doc.Text(), "Over 80 lines:"):
				t.Errorf("%s: %d lines, over %d without a reason: split it, or say why above it (\"Over 80 lines: ...\")", key, n, reasonLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range longAllowed {
		if !seen[key] {
			t.Errorf("%s: in longAllowed, but no longer over %d lines (or gone): remove it", key, reasonLines)
		}
	}
}

// funcName is fd's name, with its receiver's type for a method
// ("Store.Claim").
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// coreMaxLines is the claim core's limit (issue 36): casetable's code, its
// tests and the simulator apart.
const coreMaxLines = 60

// TestClaimCoreFunctionLengths: no function of the claim core (casetable's
// non-test files) is over 60 lines.
func TestClaimCoreFunctionLengths(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "casetable", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("casetable's files: %v, %v", files, err)
	}
	fset := token.NewFileSet()
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > coreMaxLines {
				t.Errorf("casetable/%s:%s: %d lines, over %d: split it", filepath.Base(p), funcName(fd), n, coreMaxLines)
			}
		}
	}
}
