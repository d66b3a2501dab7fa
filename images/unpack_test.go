package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// entry is one tar entry of a hand-made layer.
type entry struct {
	name     string
	typ      byte
	body     string
	link     string
	mode     int64
	uid, gid int
}

func file(name, body string) entry {
	return entry{name: name, typ: tar.TypeReg, body: body, mode: 0o644}
}
func dir(name string) entry { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(name, target string) entry { return entry{name: name, typ: tar.TypeLink, link: target} }

func tarOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Uid: e.uid, Gid: e.gid, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func layerOf(digest string, data []byte) Layer {
	return Layer{Digest: digest, Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}
}

// sandbox is a directory holding rootfs/ and, beside it, outside/victim: the thing attacks aim at.
type sandbox struct{ base, rootfs, outside string }

func newSandbox(t *testing.T) sandbox {
	base := t.TempDir()
	s := sandbox{base, filepath.Join(base, "rootfs"), filepath.Join(base, "outside")}
	os.Mkdir(s.rootfs, 0o755)
	os.Mkdir(s.outside, 0o755)
	os.WriteFile(filepath.Join(s.outside, "victim"), []byte("original"), 0o644)
	return s
}

// snapshot lists everything outside rootfs/ with its mode and content.
func (s sandbox) snapshot(t *testing.T) string {
	var lines []string
	filepath.WalkDir(s.base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == s.rootfs {
			return filepath.SkipDir
		}
		fi, _ := d.Info()
		line := p + " " + fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += " " + string(b)
		}
		lines = append(lines, line)
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestHostileLayers(t *testing.T) {
	type tc struct {
		name   string
		layers func(s sandbox) [][]entry
		rule   string // "" when the unpack must succeed (neutralised)
		entry  string
		check  func(t *testing.T, s sandbox, rep *UnpackReport)
	}
	one := func(es ...entry) func(sandbox) [][]entry { return func(sandbox) [][]entry { return [][]entry{es} } }
	tests := []tc{
		{name: "dotdot", layers: one(file("../outside/victim", "pwned")), rule: RuleDotDot, entry: "../outside/victim"},
		{name: "dotdot inside path", layers: one(file("a/../../outside/victim", "pwned")), rule: RuleDotDot},
		{name: "absolute path", layers: func(s sandbox) [][]entry { return [][]entry{{file(filepath.Join(s.outside, "victim"), "pwned")}} }, rule: RuleAbsolutePath},
		{name: "symlink escapes", layers: one(symlink("link", "../outside")), rule: RuleSymlinkEscape, entry: "link"},
		{name: "deep symlink escapes", layers: one(dir("a"), symlink("a/link", "../../outside/victim")), rule: RuleSymlinkEscape},
		{name: "write through planted absolute symlink", layers: func(s sandbox) [][]entry {
			return [][]entry{{symlink("planted", s.outside), file("planted/victim", "pwned")}}
		}, rule: RuleThroughSymlink, entry: "planted/victim"},
		{name: "write through planted link in a later layer", layers: func(s sandbox) [][]entry {
			return [][]entry{{symlink("etc", s.outside)}, {file("etc/victim", "pwned")}}
		}, rule: RuleThroughSymlink},
		{name: "write through link to /", layers: one(symlink("root", "/"), file("root/tmp/sealrun-pwned", "x")), rule: RuleThroughSymlink},
		{name: "mkdir through planted link", layers: func(s sandbox) [][]entry {
			return [][]entry{{symlink("d", s.outside), file("d/new/file", "x")}}
		}, rule: RuleThroughSymlink},
		{name: "hardlink escapes", layers: one(hardlink("h", "../outside/victim")), rule: RuleHardlinkEscape, entry: "h"},
		{name: "hardlink to host path", layers: one(hardlink("h", "/etc/passwd")), rule: RuleHardlinkEscape},
		{name: "hardlink through planted link", layers: func(s sandbox) [][]entry {
			return [][]entry{{symlink("p", s.outside), hardlink("h", "p/victim")}}
		}, rule: RuleHardlinkEscape},
		{name: "hardlink to nothing", layers: one(hardlink("h", "missing")), rule: RuleHardlinkEscape},
		{name: "whiteout through planted link", layers: func(s sandbox) [][]entry {
			return [][]entry{{symlink("w", s.outside)}, {file("w/.wh.victim", "")}}
		}, rule: RuleThroughSymlink},
		{name: "opaque whiteout through planted link", layers: func(s sandbox) [][]entry {
			return [][]entry{{symlink("w", s.outside)}, {file("w/.wh..wh..opq", "")}}
		}, rule: RuleThroughSymlink},
		{name: "unsupported type", layers: one(entry{name: "s", typ: 'Z', mode: 0o644}), rule: RuleUnsupportedEntry},
		{name: "owner out of range", layers: one(entry{name: "f", typ: tar.TypeReg, mode: 0o644, uid: 70000}), rule: RuleOwnerRange},
		{name: "device nodes and FIFOs neutralised", layers: one(
			entry{name: "dev/sda", typ: tar.TypeBlock, mode: 0o660}, entry{name: "dev/null", typ: tar.TypeChar, mode: 0o666}, entry{name: "fifo", typ: tar.TypeFifo, mode: 0o644}, file("ok", "fine")),
			check: func(t *testing.T, s sandbox, rep *UnpackReport) {
				for _, p := range []string{"dev/sda", "dev/null", "fifo"} {
					if _, err := os.Lstat(filepath.Join(s.rootfs, p)); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("%s was created", p)
					}
				}
				if len(rep.SkippedDevices) != 3 {
					t.Errorf("skipped = %v", rep.SkippedDevices)
				}
			}},
		{name: "setuid stripped", layers: one(entry{name: "bin/su", typ: tar.TypeReg, mode: 0o4755, body: "x"}, entry{name: "bin/sg", typ: tar.TypeReg, mode: 0o2755, body: "x"}, entry{name: "tmp", typ: tar.TypeDir, mode: 0o1777}),
			check: func(t *testing.T, s sandbox, rep *UnpackReport) {
				for _, p := range []string{"bin/su", "bin/sg"} {
					fi, _ := os.Stat(filepath.Join(s.rootfs, p))
					if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 || fi.Mode().Perm() != 0o755 {
						t.Errorf("%s mode %v", p, fi.Mode())
					}
				}
				if fi, _ := os.Stat(filepath.Join(s.rootfs, "tmp")); fi.Mode()&fs.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
					t.Errorf("sticky /tmp lost: %v", fi.Mode())
				}
				if len(rep.StrippedSetuid) != 2 {
					t.Errorf("stripped = %v", rep.StrippedSetuid)
				}
			}},
		{name: "symlink replaced by directory stays inside", layers: func(s sandbox) [][]entry {
			return [][]entry{{symlink("d", s.outside)}, {entry{name: "d", typ: tar.TypeDir, mode: 0o700}, file("d/victim", "inside")}}
		}, check: func(t *testing.T, s sandbox, rep *UnpackReport) {
			b, _ := os.ReadFile(filepath.Join(s.rootfs, "d/victim"))
			if string(b) != "inside" {
				t.Errorf("d/victim = %q", b)
			}
		}},
		{name: "file replaces planted symlink, not its target", layers: func(s sandbox) [][]entry {
			return [][]entry{{symlink("f", filepath.Join(s.outside, "victim"))}, {file("f", "new")}}
		}, check: func(t *testing.T, s sandbox, rep *UnpackReport) {
			fi, _ := os.Lstat(filepath.Join(s.rootfs, "f"))
			if !fi.Mode().IsRegular() {
				t.Errorf("f is %v", fi.Mode())
			}
		}},
		{name: "absolute symlink kept for the container", layers: one(symlink("usr/bin/python", "/usr/bin/python3.11")), check: func(t *testing.T, s sandbox, rep *UnpackReport) {
			if got, _ := os.Readlink(filepath.Join(s.rootfs, "usr/bin/python")); got != "/usr/bin/python3.11" {
				t.Errorf("link = %q", got)
			}
		}},
		{name: "whiteout removes only its own entry", layers: func(s sandbox) [][]entry {
			return [][]entry{{file("a/keep", "k"), file("a/gone", "g")}, {file("a/.wh.gone", "")}}
		}, check: func(t *testing.T, s sandbox, rep *UnpackReport) {
			if _, err := os.Lstat(filepath.Join(s.rootfs, "a/gone")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a/gone survived its whiteout: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(s.rootfs, "a/keep")); err != nil || string(b) != "k" {
				t.Errorf("a/keep: %q %v", b, err)
			}
			if _, err := os.Lstat(filepath.Join(s.rootfs, "a/.wh.gone")); !errors.Is(err, fs.ErrNotExist) {
				t.Error("the whiteout marker itself was written")
			}
			if rep.Whiteouts != 1 {
				t.Errorf("whiteouts = %d, want 1", rep.Whiteouts)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			before := s.snapshot(t)
			var layers []Layer
			for i, es := range tc.layers(s) {
				layers = append(layers, layerOf("sha256:layer"+string(rune('0'+i)), tarOf(t, es...)))
			}
			rep, err := Unpack(context.Background(), "test/image@sha256:abc", layers, s.rootfs, UnpackOptions{})
			if tc.rule != "" {
				var ue *UnpackError
				if !errors.As(err, &ue) || ue.Rule != tc.rule {
					t.Fatalf("err = %v, want rule %q", err, tc.rule)
				}
				if tc.entry != "" && ue.Entry != tc.entry {
					t.Errorf("entry = %q, want %q", ue.Entry, tc.entry)
				}
				for _, part := range []string{"test/image@sha256:abc", "sha256:layer", tc.rule} {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not name %q", err, part)
					}
				}
			} else if err != nil {
				t.Fatalf("unpack: %v", err)
			}
			if after := s.snapshot(t); after != before {
				t.Errorf("something outside the rootfs changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if _, err := os.Lstat("/tmp/sealrun-pwned"); err == nil {
				t.Error("/tmp/sealrun-pwned was created")
			}
			if tc.check != nil {
				tc.check(t, s, rep)
			}
		})
	}
}

func TestWhiteouts(t *testing.T) {
	s := newSandbox(t)
	l1 := tarOf(t, dir("etc"), file("etc/a", "1"), file("etc/b", "1"), dir("opt"), file("opt/x", "1"), dir("opt/sub"), file("opt/sub/y", "1"), file("keep", "1"))
	// Layer 2: whiteout etc/a; opaque opt (marker after a new child: order must not matter).
	l2 := tarOf(t, file("etc/.wh.a", ""), dir("opt"), file("opt/new", "2"), file("opt/.wh..wh..opq", ""), file("etc/.wh.missing", ""))
	rep, err := Unpack(context.Background(), "img", []Layer{layerOf("sha256:1", l1), layerOf("sha256:2", l2)}, s.rootfs, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Lstat(filepath.Join(s.rootfs, p)); return err == nil }
	for p, want := range map[string]bool{"etc/a": false, "etc/b": true, "opt/x": false, "opt/sub": false, "opt/new": true, "keep": true, "etc/.wh.a": false, "opt/.wh..wh..opq": false} {
		if exists(p) != want {
			t.Errorf("%s exists = %v, want %v", p, !want, want)
		}
	}
	if rep.Whiteouts != 3 {
		t.Errorf("whiteouts = %d", rep.Whiteouts)
	}
}

func TestBombCaps(t *testing.T) {
	s := newSandbox(t)
	var many []entry
	for i := 0; i < 11; i++ {
		many = append(many, file("f"+string(rune('a'+i)), "x"))
	}
	_, err := Unpack(context.Background(), "img", []Layer{layerOf("sha256:1", tarOf(t, many...))}, s.rootfs, UnpackOptions{MaxFiles: 10})
	var ue *UnpackError
	if !errors.As(err, &ue) || ue.Rule != RuleTooManyFiles || !strings.Contains(err.Error(), "UnpackOptions.MaxFiles: more than 10 entries") {
		t.Errorf("files cap: %v", err)
	}
	_, err = Unpack(context.Background(), "img", []Layer{layerOf("sha256:1", tarOf(t, file("big", strings.Repeat("x", 200))))}, newSandbox(t).rootfs, UnpackOptions{MaxBytes: 100})
	if !errors.As(err, &ue) || ue.Rule != RuleTooManyBytes || !strings.Contains(err.Error(), "UnpackOptions.MaxBytes: more than 100 bytes") {
		t.Errorf("bytes cap: %v", err)
	}
}

func TestTruncatedLayer(t *testing.T) {
	data := tarOf(t, file("a", strings.Repeat("x", 5000)))
	_, err := Unpack(context.Background(), "img", []Layer{layerOf("sha256:1", data[:3000])}, newSandbox(t).rootfs, UnpackOptions{})
	if err == nil || !strings.Contains(err.Error(), "sha256:1") {
		t.Errorf("truncated: %v", err)
	}
}

// Root only: ownership is kept numeric and shifted into a user-namespace range.
func TestOwnershipShift(t *testing.T) {
	requireRoot(t)
	s := newSandbox(t)
	data := tarOf(t, entry{name: "home/u", typ: tar.TypeDir, mode: 0o750, uid: 1000, gid: 1000}, entry{name: "home/u/f", typ: tar.TypeReg, mode: 0o640, uid: 1000, gid: 100, body: "x"}, entry{name: "rootfile", typ: tar.TypeReg, mode: 0o600, body: "x"}, entry{name: "l", typ: tar.TypeSymlink, link: "rootfile", uid: 5, gid: 6})
	_, err := Unpack(context.Background(), "img", []Layer{layerOf("sha256:1", data)}, s.rootfs, UnpackOptions{Chown: true, UIDShift: 200000, GIDShift: 300000})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string][2]uint32{"home/u": {201000, 301000}, "home/u/f": {201000, 300100}, "rootfile": {200000, 300000}, "l": {200005, 300006}} {
		fi, err := os.Lstat(filepath.Join(s.rootfs, p))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != want[0] || st.Gid != want[1] {
			t.Errorf("%s owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, want[0], want[1])
		}
	}
}

func TestCleanName(t *testing.T) {
	for name, want := range map[string]string{"./a/b": "a/b", "a//b/": "a/b", "a/./b": "a/b", "a/../b": "b", ".": ".", "./": "."} {
		if got, rule := cleanName(name); got != want || rule != "" {
			t.Errorf("cleanName(%q) = %q %q, want %q", name, got, rule, want)
		}
	}
	for name, rule := range map[string]string{"": RuleBadName, "a\x00b": RuleBadName, "/etc": RuleAbsolutePath, "..": RuleDotDot, "a/../../b": RuleDotDot, "../": RuleDotDot} {
		if _, got := cleanName(name); got != rule {
			t.Errorf("cleanName(%q) rule %q, want %q", name, got, rule)
		}
	}
}
