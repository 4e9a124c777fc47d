// The layer rule of docs/ARCHITECTURE.md, held against the real import graph, and the page's
// names held against the tree. Run: go test -run Architecture .
package posttrain_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	module   = "github.com/posttrain/posttrain/"
	archPage = "docs/ARCHITECTURE.md"
)

// layer is one line of the page's "## Layers" block: the packages it names (a path, or dir/...
// for every package under dir that no other line names) and its line number in the page.
type layer struct {
	line     int
	patterns []string
}

// readLayers reads the first code block under "## Layers": one layer a line, top to bottom,
// "PATTERN PATTERN ...: what they are".
func readLayers(t *testing.T) []layer {
	t.Helper()
	f, err := os.Open(archPage)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var layers []layer
	section, inBlock := false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		switch {
		case strings.HasPrefix(text, "## "):
			if inBlock {
				t.Fatalf("%s:%d: the layers block is not closed", archPage, n)
			}
			section = text == "## Layers"
		case section && strings.HasPrefix(text, "```"):
			if inBlock {
				return layers
			}
			inBlock = true
		case section && inBlock && strings.TrimSpace(text) != "":
			if strings.HasPrefix(text, " ") { // a description continued
				continue
			}
			pats, _, ok := strings.Cut(text, ":")
			if !ok {
				t.Fatalf("%s:%d: a layer line is PATTERN ...: description, got %q", archPage, n, text)
			}
			layers = append(layers, layer{line: n, patterns: strings.Fields(pats)})
		}
	}
	t.Fatalf("%s: no code block under \"## Layers\"", archPage)
	return nil
}

// rankOf is the index in layers of the line naming pkg (a path relative to the module): an exact
// pattern first, else the longest dir/... that holds it; -1 when no line names it.
func rankOf(layers []layer, pkg string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, p := range l.patterns {
			if p == pkg {
				return i
			}
			if dir, ok := strings.CutSuffix(p, "/..."); ok && (pkg == dir || strings.HasPrefix(pkg, dir+"/")) && len(dir) > bestLen {
				best, bestLen = i, len(dir)
			}
		}
	}
	return best
}

// imports lists each package of the module with the module packages it imports (not its tests),
// under the given build tags.
func imports(t *testing.T, tags string) map[string][]string {
	t.Helper()
	args := []string{"list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "./...")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -tags %q: %v", tags, err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok || strings.HasPrefix(pkg, "third_party/") {
			continue
		}
		graph[pkg] = []string{}
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				graph[pkg] = append(graph[pkg], rel)
			}
		}
	}
	return graph
}

// TestArchitecture_Layers: every package is on a line of the page's layers block, and imports
// only packages of the lines below its own (so no two packages of one line import each other:
// no trainer method imports another). Every build's imports count: the default, noxla and
// hftokenizers.
func TestArchitecture_Layers(t *testing.T) {
	if testing.Short() {
		t.Skip("go list of the whole module")
	}
	layers := readLayers(t)
	for _, tags := range []string{"", "noxla", "hftokenizers"} {
		graph := imports(t, tags)
		for _, pkg := range slices.Sorted(maps.Keys(graph)) {
			r := rankOf(layers, pkg)
			if r < 0 {
				t.Errorf("package %s is on no line of %s's layers block", pkg, archPage)
				continue
			}
			for _, imp := range graph[pkg] {
				ri := rankOf(layers, imp)
				if ri <= r {
					t.Errorf("%s imports %s (tags %q): %s:%d may import only from the lines below it, and %s is on line %d",
						pkg, imp, tags, archPage, layers[r].line, imp, layers[max(ri, 0)].line)
				}
			}
		}
	}
	for _, l := range layers {
		for _, p := range l.patterns {
			dir := strings.TrimSuffix(p, "/...")
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				t.Errorf("%s:%d: %s is not a directory of the tree", archPage, l.line, p)
			}
		}
	}
}

// topLevel are the folders a backticked path of the page starts with.
var topLevel = []string{"cmd", "apps", "trainers", "models", "data", "internal", "toy", "scripts", "docs", "examples", "third_party"}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	braces     = regexp.MustCompile(`\{([^{}]*)\}`)
	qualified  = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?$`)
)

// expand writes out a path's {a,b} alternatives.
func expand(p string) []string {
	m := braces.FindStringSubmatchIndex(p)
	if m == nil {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[m[2]:m[3]], ",") {
		out = append(out, expand(p[:m[0]]+alt+p[m[1]:])...)
	}
	return out
}

// declarations maps each package name of the module to what its non-test files declare at top
// level (Name) and on its types (Type.Method, Type.Field, Interface.Method).
func declarations(t *testing.T, pkgs []string) map[string]map[string]bool {
	t.Helper()
	decls := map[string]map[string]bool{}
	fset := token.NewFileSet()
	for _, pkg := range pkgs {
		files, _ := filepath.Glob(filepath.Join(pkg, "*.go"))
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			name := f.Name.Name
			if decls[name] == nil {
				decls[name] = map[string]bool{}
			}
			add := func(s string) { decls[name][s] = true }
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						add(d.Name.Name)
						continue
					}
					typ := d.Recv.List[0].Type
					if s, ok := typ.(*ast.StarExpr); ok {
						typ = s.X
					}
					if ix, ok := typ.(*ast.IndexExpr); ok {
						typ = ix.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						add(id.Name + "." + d.Name.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							add(s.Name.Name)
							var fields *ast.FieldList
							switch ty := s.Type.(type) {
							case *ast.StructType:
								fields = ty.Fields
							case *ast.InterfaceType:
								fields = ty.Methods
							}
							if fields != nil {
								for _, fl := range fields.List {
									for _, n := range fl.Names {
										add(s.Name.Name + "." + n.Name)
									}
								}
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								add(n.Name)
							}
						}
					}
				}
			}
		}
	}
	return decls
}

// TestArchitecture_NamesExist: every path the page puts in backticks (under one of the tree's
// top-level folders, with {a,b} written out) exists, and every pkg.Name or pkg.Type.Member of a
// package of the module is declared there.
func TestArchitecture_NamesExist(t *testing.T) {
	if testing.Short() {
		t.Skip("go list of the whole module")
	}
	page, err := os.ReadFile(archPage)
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for p := range imports(t, "") {
		pkgs = append(pkgs, p)
	}
	decls := declarations(t, pkgs)
	checked := 0
	for i, line := range strings.Split(string(page), "\n") {
		for _, m := range backticked.FindAllStringSubmatch(line, -1) {
			s := strings.TrimSuffix(m[1], "()")
			if top, _, ok := strings.Cut(s, "/"); ok && slices.Contains(topLevel, top) && !strings.ContainsAny(s, " *") {
				for _, p := range expand(s) {
					p = strings.TrimSuffix(strings.TrimSuffix(p, "/..."), "/")
					if _, err := os.Stat(p); err != nil {
						t.Errorf("%s:%d: `%s`: %s does not exist", archPage, i+1, m[1], p)
					}
					checked++
				}
				continue
			}
			q := qualified.FindStringSubmatch(s)
			if q == nil || decls[q[1]] == nil {
				continue
			}
			name := q[2]
			if q[3] != "" {
				name += "." + q[3]
			}
			if !decls[q[1]][name] {
				t.Errorf("%s:%d: `%s`: package %s declares no %s", archPage, i+1, m[1], q[1], name)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("only %d names checked: is %s's markup what this test reads?", checked, archPage)
	}
	t.Logf("%s: %d paths and names checked", archPage, checked)
}
