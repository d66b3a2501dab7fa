package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func specJSON(t *testing.T, role Role) []byte {
	t.Helper()
	s, err := Spec(ExampleProfile(role, "/var/lib/sealrun/images/sha256/<digest>/rootfs"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// The spec of each role is pinned by a golden file, and validates against the runtime-spec's
// own JSON Schema (config-schema.json of the module version we build with).
func TestSpecGoldenAndSchema(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/opencontainers/runtime-spec").Output()
	if err != nil {
		t.Fatalf("find the runtime-spec module: %v", err)
	}
	// The runtime-spec schemas are draft-04 and write references as "defs.json#definitions/x";
	// this validator wants a JSON pointer ("#/definitions/x"), so the fragments are normalised
	// as the files are loaded. Nothing else is changed.
	dir := filepath.Join(strings.TrimSpace(string(out)), "schema")
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(strings.ReplaceAll(string(b), "#definitions/", "#/definitions/")))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := c.AddResource("file://"+f, doc); err != nil {
			t.Fatal(err)
		}
	}
	schema, err := c.Compile("file://" + filepath.Join(dir, "config-schema.json"))
	if err != nil {
		t.Fatalf("compile the runtime-spec schema: %v", err)
	}
	for _, role := range Roles {
		got := specJSON(t, role)
		path := filepath.Join("testdata", "spec-"+string(role)+".json")
		if *update {
			os.WriteFile(path, got, 0o644)
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./sandbox -update creates it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s spec differs from %s (go test ./sandbox -update to accept)", role, path)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(got))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Errorf("%s spec does not validate against the runtime-spec schema: %v", role, err)
		}
	}
	broken, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"ociVersion": "1.0.0", "root": {"path": 7}}`))
	if err := schema.Validate(broken); err == nil {
		t.Error("the schema accepts a root path that is a number: it checks nothing")
	}
}

func TestSpecProperties(t *testing.T) {
	for _, role := range Roles {
		s, err := Spec(ExampleProfile(role, "/rootfs"))
		if err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, n := range s.Linux.Namespaces {
			if n.Path != "" {
				t.Errorf("%s joins an existing %s namespace", role, n.Type)
			}
			ns = append(ns, string(n.Type))
		}
		if strings.Join(ns, ",") != "pid,ipc,uts,mount,network,cgroup,user" {
			t.Errorf("%s namespaces %v", role, ns)
		}
		caps := s.Process.Capabilities
		if len(caps.Bounding)+len(caps.Effective)+len(caps.Permitted)+len(caps.Inheritable)+len(caps.Ambient) != 0 {
			t.Errorf("%s has capabilities", role)
		}
		if !s.Root.Readonly || !s.Process.NoNewPrivileges || s.Linux.Seccomp.DefaultAction != specs.ActErrno || s.Linux.UIDMappings[0].HostID < RangeBase {
			t.Errorf("%s spec lacks a protection", role)
		}
		if *s.Linux.Resources.Memory.Swap != *s.Linux.Resources.Memory.Limit {
			t.Errorf("%s swap limit differs from memory limit", role)
		}
		if d := s.Linux.Resources.Devices[0]; d.Allow || d.Access != "rwm" {
			t.Errorf("%s device cgroup does not start with deny-all", role)
		}
		mounts := map[string]specs.Mount{}
		for _, m := range s.Mounts {
			mounts[m.Destination] = m
		}
		_, ws := mounts[WorkspacePath]
		_, bundle := mounts[BundlePath]
		_, runner := mounts[RunnerPath]
		if ws != (role != RoleGrader) || bundle != (role == RoleGrader) || runner != (role == RoleController) {
			t.Errorf("%s mounts: workspace %v bundle %v runner %v", role, ws, bundle, runner)
		}
		for _, m := range s.Mounts {
			if strings.Contains(m.Source, "exam") {
				t.Errorf("%s mounts something exam-like: %s", role, m.Source)
			}
		}
		for _, e := range s.Process.Env {
			if strings.HasPrefix(e, "LD_") || strings.Contains(strings.ToLower(e), "proxy") {
				t.Errorf("%s env %s", role, e)
			}
		}
	}
}

func TestSpecRejects(t *testing.T) {
	gpu := []specs.LinuxDevice{{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0}}
	tests := []struct {
		name string
		edit func(p *Profile)
		want string
	}{
		{"unknown role", func(p *Profile) { p.Role = "admin" }, "unknown role"},
		{"relative rootfs", func(p *Profile) { p.Rootfs = "rootfs" }, "absolute path"},
		{"no command", func(p *Profile) { p.Args = nil }, "no command"},
		{"root mapped to root", func(p *Profile) { p.UIDs = IDRange{Base: 0, Size: RangeSize} }, "unprivileged range"},
		{"small range", func(p *Profile) { p.UIDs.Size = 1000 }, "unprivileged range"},
		{"controller with GPU", func(p *Profile) { p.Devices = gpu }, "never gets devices"},
		{"LD_ variable", func(p *Profile) { p.Env = []string{"LD_LIBRARY_PATH=/x"} }, "no LD_*"},
		{"malformed env", func(p *Profile) { p.Env = []string{"NOVALUE"} }, "KEY=VALUE"},
		{"controller with bundle", func(p *Profile) { p.Bundle = "/b" }, "only the grader mounts a bundle"},
		{"no workspace", func(p *Profile) { p.Workspace = "" }, "no workspace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ExampleProfile(RoleController, "/rootfs")
			tc.edit(&p)
			if _, err := Spec(p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	g := ExampleProfile(RoleGrader, "/rootfs")
	g.Workspace = "/ws"
	if _, err := Spec(g); err == nil || !strings.Contains(err.Error(), "never sees the workspace") {
		t.Errorf("grader with workspace: %v", err)
	}
	r := ExampleProfile(RoleRunner, "/rootfs")
	r.Runner = "/usr/local/bin/runner"
	if _, err := Spec(r); err == nil {
		t.Error("runner got the runner client")
	}
	r = ExampleProfile(RoleRunner, "/rootfs")
	r.Devices = gpu
	s, err := Spec(r)
	if err != nil {
		t.Fatal(err)
	}
	last := s.Linux.Resources.Devices[len(s.Linux.Resources.Devices)-1]
	bound := s.Mounts[len(s.Mounts)-1]
	if !last.Allow || *last.Major != 195 || len(s.Linux.Devices) != 0 || bound.Destination != gpu[0].Path || bound.Source != gpu[0].Path || slices.Contains(bound.Options, "nodev") {
		t.Errorf("runner GPU device not allowed and bound from the host: rule %+v, last mount %+v, runtime-made nodes %v", last, bound, s.Linux.Devices)
	}
}

func TestRanges(t *testing.T) {
	dir := t.TempDir()
	rg, err := OpenRanges(dir, "/run/host-a")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]bool{}
	var all []IDRange
	rg.count = 64
	for i := 0; i < rg.count; i++ {
		x, err := rg.Allocate("c" + string(rune('a'+i%26)))
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if seen[x.Base] || x.Base < RangeBase || x.Size != RangeSize {
			t.Fatalf("range %+v overlaps or is privileged", x)
		}
		seen[x.Base] = true
		all = append(all, x)
	}
	if _, err := rg.Allocate("one too many"); !errors.Is(err, ErrRangesExhausted) || !strings.Contains(err.Error(), "reap leftovers") {
		t.Errorf("exhausted: %v", err)
	}
	if err := rg.Release(all[7]); err != nil {
		t.Fatal(err)
	}
	if x, err := rg.Allocate("again"); err != nil || x != all[7] {
		t.Errorf("reuse after release: %+v %v", x, err)
	}
	if err := rg.Release(IDRange{Base: 12345, Size: RangeSize}); err == nil {
		t.Error("released a range that is not sealrun's")
	}
	owners, _ := rg.Owners()
	if len(owners) != rg.count || owners[all[7]] != "again" {
		t.Errorf("owners: %d, %q", len(owners), owners[all[7]])
	}
	// A second host on the same machine shares the directory: it gets other ranges, sees none
	// of the first host's as its own, and cannot release them.
	other, err := OpenRanges(dir, "/run/host-b")
	if err != nil {
		t.Fatal(err)
	}
	other.count = rg.count + 1
	x, err := other.Allocate("b1")
	if err != nil || seen[x.Base] {
		t.Fatalf("second host got %+v, %v; want a range the first does not hold", x, err)
	}
	if o, _ := other.Owners(); len(o) != 1 || o[x] != "b1" {
		t.Errorf("second host's owners: %v", o)
	}
	if err := other.Release(all[3]); err == nil || !strings.Contains(err.Error(), "belongs to another sealrun") {
		t.Errorf("second host released the first's range: %v", err)
	}
	if owners, _ := rg.Owners(); len(owners) != rg.count {
		t.Errorf("first host lost ranges: %d", len(owners))
	}
	if _, err := OpenRanges(dir, ""); err == nil {
		t.Error("empty tag accepted")
	}
}

func TestCheckAirGap(t *testing.T) {
	good := NetnsEvidence{Names: []string{"lo"}, Addresses: []string{"127.0.0.1/8 lo"}, Routes: []string{"127.0.0.0/8 dev lo table 255"}}
	if err := checkAirGap(RoleRunner, good); err != nil {
		t.Error(err)
	}
	for name, ev := range map[string]NetnsEvidence{
		"extra link":    {Names: []string{"eth0", "lo"}},
		"default route": {Names: []string{"lo"}, Routes: []string{"default via 10.0.0.1 dev lo"}},
		"ipv6 address":  {Names: []string{"lo"}, Addresses: []string{"::1/128 lo"}},
		"other address": {Names: []string{"lo"}, Addresses: []string{"10.1.1.1/24 lo"}},
		"main route":    {Names: []string{"lo"}, Routes: []string{"10.0.0.0/8 dev lo"}},
	} {
		if err := checkAirGap(RoleRunner, ev); err == nil {
			t.Errorf("%s passed the air-gap check", name)
		}
	}
	if err := checkAirGap(RoleController, good); err == nil {
		t.Error("a controller without its veth passed")
	}
}

func TestCPUList(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "3,1,2": "1-3", "0-3,8,10-11": "0-3,8,10-11", " 5 ": "5", "2,2,2-3": "2-3"} {
		cpus, err := ParseCPUList(in)
		if err != nil || FormatCPUList(cpus) != want {
			t.Errorf("%q: %v %v; want %s", in, cpus, err, want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "-1", "1,,2", "0-99999"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := (Limits{CPUs: 2, CPUSet: "0"}).Validate(); err == nil || !strings.Contains(err.Error(), "limits.cpuset") {
		t.Errorf("a CPU set smaller than the CPU limit: %v", err)
	}
	s, err := Spec(Profile{Role: RoleRunner, Rootfs: "/r", Args: []string{"x"}, UIDs: IDRange{Base: RangeBase, Size: RangeSize}, SharedGID: RangeBase, Workspace: "/w", Limits: Limits{CPUSet: "1"}})
	if err != nil || s.Linux.Resources.CPU.Cpus != "1" {
		t.Errorf("cpuset in the spec: %v", err)
	}
}
