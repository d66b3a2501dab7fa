package e2e

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sealrun/sealrun"

// allowed pins which sibling packages each package may import (ARCHITECTURE.md, "Packages, by floor"). A package's
// own internal/ packages are always allowed; daemon, cmd/sealrun and e2e compose everything.
var allowed = map[string][]string{
	"policy":                 {},
	"exams":                  {},
	"audit":                  {"policy"}, // a record's tokens as the budget counts them
	"kits":                   {"exams"},
	"tracks":                 {},
	"images":                 {},                                        // the OCI store: no sibling
	"images/builder":         {"images", "policy", "kits", "scaffolds"}, // the demo controller image carries kits/demo-agent; the agents' images, scaffolds/
	"scaffolds":              {},                                        // the agents sealrun ships: recipes and config templates, no sibling
	"sandbox":                {"policy", "images"},
	"controller":             {"policy", "sandbox", "audit"},
	"runner":                 {"policy", "sandbox", "audit"},
	"grader":                 {"policy", "sandbox", "exams", "audit", "airs", "report"},
	"attest":                 {"policy", "audit", "ledger", "tpm"},            // tpm: a signing key made in the host's TPM (LoadSigner("tpm:DEVICE"))
	"leaderboard":            {"policy", "attest", "airs", "ledger", "stats"}, // airs: the AIRS suite's scores
	"airs":                   {"stats"},                                       // AIRS-Bench task format and scores: no sibling
	"ledger":                 {},                                              // the run ledger: no sibling (portable, like attest)
	"tpm":                    {},                                              // the host's TPM: keys, enrollment, quotes and their checks; no sibling
	"cmd/runner":             {"sandbox"},                                     // sandbox/posture only: the record it prints (portable types)
	"cmd/sealrun-netns-hook": {"sandbox"},
	"cmd/sealrund":           {"daemon", "api", "policy", "hostconfig", "buildinfo"},
	"publish":                {"policy", "attest", "leaderboard", "airs", "transcript", "audit", "ledger", "export"},                   // a publication: written and checked from attestations alone (and the bodies their audit logs hash); ledger/witness: its ledgers' cosigned heads
	"verify":                 {"policy", "attest", "leaderboard", "airs", "transcript", "audit", "ledger", "export", "publish", "tpm"}, // the reader's verifier: portable, nothing that runs containers; publish: what it regenerates; tpm: a host's quotes, checked offline
	"transcript":             {"audit", "attest", "policy"},                                                                            // a run reassembled: portable, like attest
	"export":                 {"transcript", "stats"},                                                                                  // a run in other tools' formats, from its transcript alone: portable
	"api":                    {"policy", "attest", "audit"},                                                                            // sealrund's wire contract: records, requests, events, frames, the state dir's layout; types only
	"client":                 {"api", "attest", "audit", "transcript", "report"},                                                       // the typed client of the admin API (a gather checks the transcript): no sandbox, no controller
	"hostconfig":             {"policy", "attest", "controller", "sandbox", "ledger"},                                                  // sealrun.toml: providers (controller), runtimes per role (sandbox), witnesses' keys (ledger/witness)
	"buildinfo":              {"attest"},                                                                                               // a binary's build record
	"daemon":                 {"*"},
	"demo":                   {"*"},                                                // a client of the daemon, composing the rest as an operator would
	"trackpin":               {"policy", "exams", "kits", "airs", "images", "api"}, // api: the state dir's layout
	"view":                   {"transcript", "attest"},                             // reads sealrund through an interface (client.Client is one), as sealrun view
	"cmd/sealrun":            {"*"},
	"e2e":                    {"*"},
	"deploy":                 {}, // deploy/kubernetes: a design's manifests and their test, no code
	// internal/testenv gates tests on the machine (root, tools, the local images), as Go's own
	// internal/testenv does; only _test files import it. internal/fileio (file helpers) and
	// internal/jsonpass (one-pass JSON reading) and internal/opt (option errors) may be imported
	// by every package.
	"internal": {},
	// The types-only core (go-containerregistry's v1): every floor may import them, and they
	// import nothing of sealrun's.
	"digest":  {},
	"outcome": {},
	"airgap":  {},
	"stats":   {},                 // statistics, in one place: no sibling
	"report":  {"policy", "airs"}, // report.json, an exam run's and a task run's: portable
}

// core are the types-only packages every floor may import (the floor below floor 0).
var core = []string{"digest", "outcome", "airgap"}

// helperImports lets a test-only helper package (an xxxtest package, imported by _test files
// only) use more than its folder may: airs/datasetstest builds its stand-in image with images.
var helperImports = map[string][]string{
	module + "/airs/datasetstest": {"images"},
}

// ownFolders are packages inside another's folder that are layout folders of their own: the
// image builder beside the image store.
var ownFolders = []string{"images/builder"}

// owner maps an import path inside the module to the layout folder that owns it.
func owner(path string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	for _, f := range ownFolders {
		if rel == f || strings.HasPrefix(rel, f+"/") {
			return f
		}
	}
	parts := strings.Split(rel, "/")
	if parts[0] == "cmd" && len(parts) > 1 {
		return "cmd/" + parts[1]
	}
	return parts[0]
}

type pkg struct {
	ImportPath string
	Doc        string
	Imports    []string
	Dir        string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestImportRules(t *testing.T) {
	for _, p := range listPackages(t) {
		o := owner(p.ImportPath)
		rules, ok := allowed[o]
		if !ok {
			t.Errorf("%s: folder %q is not in the layout; add it to ARCHITECTURE.md and this test", p.ImportPath, o)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			impOwner := owner(imp)
			if imp == module+"/internal/fileio" || imp == module+"/internal/inflight" || imp == module+"/internal/mountinfo" || imp == module+"/internal/jsonpass" || imp == module+"/internal/opt" {
				continue // the file helpers, the request counter, the mount table, the one-pass JSON reading and the option errors of every floor (no sibling of their own)
			}
			if impOwner == o || (len(rules) == 1 && rules[0] == "*") || slices.Contains(core, impOwner) {
				continue
			}
			if impOwner == "internal" && strings.HasSuffix(p.ImportPath, "test") {
				continue // xxxtest helper packages may use the test gates
			}
			ok := false
			for _, r := range append(append([]string{}, rules...), helperImports[p.ImportPath]...) {
				ok = ok || r == impOwner
			}
			if !ok {
				t.Errorf("%s imports %s: %s may import only %v", p.ImportPath, imp, o, rules)
			}
			if o == "cmd/runner" && imp != module+"/sandbox/posture" {
				t.Errorf("%s imports %s: the static runner client may take only the posture record's types (sandbox/posture)", p.ImportPath, imp)
			}
			if o == "attest" && impOwner == "sandbox" && imp != module+"/sandbox/netnshook" {
				t.Errorf("%s imports %s: the verify path may take only the portable air-gap rule (sandbox/netnshook) from the sandbox", p.ImportPath, imp)
			}
		}
	}
}

// daemonUsers are the only packages that may import package daemon, the server: what runs a
// daemon (sealrund; the demo, which runs one in-process). Everything else — the CLI, the viewer,
// trackpin — speaks to sealrund through its contract, package api. (Tests may import it too.)
var daemonUsers = []string{"cmd/sealrund", "demo"}

// A client of sealrund and the reader's verifier run on a laptop: they link nothing that runs
// containers or model traffic (sandbox, controller), nor the daemon, nor its configuration.
func TestClientAndVerifierLinkNoSandbox(t *testing.T) {
	for _, root := range []string{"client", "verify", "view"} {
		cmd := exec.Command("go", "list", "-deps", module+"/"+root)
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", root, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			switch owner(dep) {
			case "sandbox", "controller", "daemon", "hostconfig", "runner", "grader", "images":
				if strings.HasPrefix(dep, module+"/") {
					t.Errorf("%s links %s: it runs on a reader's laptop; move what it needs into a types package (api, airgap, digest, outcome)", root, dep)
				}
			}
		}
	}
}

func TestOnlyWhatRunsADaemonImportsIt(t *testing.T) {
	for _, p := range listPackages(t) {
		o := owner(p.ImportPath)
		for _, imp := range p.Imports {
			if imp == module+"/daemon" && o != "daemon" && !slices.Contains(daemonUsers, o) {
				t.Errorf("%s imports %s: only %v may (they run a daemon); use package api, its contract and client", p.ImportPath, imp, daemonUsers)
			}
		}
	}
}

func TestEveryFolderHasPackageDoc(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range listPackages(t) {
		seen[owner(p.ImportPath)] = true
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("%s has no package doc comment saying what it owns", p.ImportPath)
		}
	}
	for o := range allowed {
		if !seen[o] {
			t.Errorf("layout folder %s has no Go package", o)
		}
	}
}

// ARCHITECTURE.md's package table lists every package of the module and nothing else, and its
// floors hold: no package imports one on a higher floor (rows with "—" are tests and helpers).
func TestArchitectureListsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../ARCHITECTURE.md")
	if err != nil {
		t.Fatalf("the repository's map: %v", err)
	}
	floors := map[string]int{} // package (relative to the module) -> floor, -1 for "—"
	row := regexp.MustCompile("^\\| *([0-9]+|—) *\\| *`([a-z0-9/-]+)` *\\|")
	for i, line := range strings.Split(string(doc), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		floor := -1
		if m[1] != "—" {
			floor, _ = strconv.Atoi(m[1])
		}
		if _, dup := floors[m[2]]; dup {
			t.Errorf("ARCHITECTURE.md:%d: %s is listed twice", i+1, m[2])
		}
		floors[m[2]] = floor
	}
	pkgs := listPackages(t)
	listed := map[string]bool{}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		listed[rel] = true
		floor, ok := floors[rel]
		if !ok {
			t.Errorf("package %s is not in ARCHITECTURE.md's table: add a row (its floor and what it owns)", rel)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := floors[strings.TrimPrefix(imp, module+"/")]
			if !strings.HasPrefix(imp, module+"/") || !ok || floor < 0 || dep < 0 {
				continue
			}
			if dep > floor {
				t.Errorf("%s (floor %d) imports %s (floor %d): an import runs upward", rel, floor, imp, dep)
			}
		}
	}
	for p := range floors {
		if _, err := os.Stat(filepath.Join("..", p, "main.c")); err == nil && floors[p] < 0 {
			continue // a C command (cmd/runner-exec): no Go package, no floor
		}
		if !listed[p] {
			t.Errorf("ARCHITECTURE.md lists %s, which `go list ./...` does not: remove or rename its row", p)
		}
	}
}

// Journal and events-stream kinds are api.EventKind's constants (api/events.go), never a string
// written in place: an api.Event whose Kind is a literal, or the daemon's event(run, "kind", …),
// is a second definition of a kind. (Untyped string constants convert silently, so the compiler
// alone does not catch them.)
func TestEventKindsAreNamed(t *testing.T) {
	fset := token.NewFileSet()
	for _, p := range listPackages(t) {
		if !strings.HasPrefix(p.ImportPath, module+"/") {
			continue
		}
		entries, _ := os.ReadDir(p.Dir)
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			path := filepath.Join(p.Dir, e.Name())
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					if !isEventType(n.Type) {
						return true
					}
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Kind" {
								if lit, ok := kv.Value.(*ast.BasicLit); ok {
									t.Errorf("%s: an api.Event of kind %s written in place; name it in api/events.go", fset.Position(lit.Pos()), lit.Value)
								}
							}
						}
					}
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && p.ImportPath == module+"/daemon" && sel.Sel.Name == "event" && len(n.Args) == 3 {
						if lit, ok := n.Args[1].(*ast.BasicLit); ok {
							t.Errorf("%s: a journal event of kind %s written in place; name it in api/events.go", fset.Position(lit.Pos()), lit.Value)
						}
					}
				}
				return true
			})
		}
	}
}

func isEventType(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		return ok && id.Name == "api" && x.Sel.Name == "Event"
	case *ast.Ident:
		return x.Name == "Event"
	}
	return false
}
