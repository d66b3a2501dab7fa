package kits

import (
	"github.com/sealrun/sealrun/digest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// buildARI builds the embedded ARI kit into a fresh directory.
func buildARI(t *testing.T) *Kit {
	t.Helper()
	k, err := Build(ARI(), "kits/ari", filepath.Join(t.TempDir(), "kit"), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestBuildIsReproducibleAndRecomputable(t *testing.T) {
	a, b := buildARI(t), buildARI(t)
	if a.Hash != b.Hash {
		t.Fatalf("two builds of the same source: %s and %s", a.Hash, b.Hash)
	}
	for _, want := range []string{"BRIEF.md", "starter/train.py", "starter/predict.py", "starter/model.py", "starter/make_bundle.sh", TrainPath, SourcesPath, ValidationPath} {
		if _, ok := a.File(want); !ok {
			t.Errorf("the built ARI kit has no %s", want)
		}
	}
	// The documented shell recipe (KIT.md) gives the same hash.
	if _, err := exec.LookPath("sha256sum"); err == nil {
		out, err := exec.Command("sh", "-c", `cd "$1" && find . -type f ! -path ./SHA256SUMS -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum`, "sh", a.Dir).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(string(out))[0]; got != string(a.Hash) {
			t.Errorf("shell recipe: %s; sealrun: %s", got, a.Hash)
		}
	}
}

func TestOpenRefusesDamagedKits(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(dir string)
		file   string
		want   string
	}{
		{"missing file", func(d string) { os.Remove(filepath.Join(d, "starter/train.py")) }, "starter/train.py", "listed in SHA256SUMS but missing"},
		{"changed file", func(d string) { os.WriteFile(filepath.Join(d, "BRIEF.md"), []byte("other"), 0o644) }, "BRIEF.md", "changed after the kit was built"},
		{"symlink out", func(d string) {
			os.Remove(filepath.Join(d, "BRIEF.md"))
			os.Symlink("/etc/shadow", filepath.Join(d, "BRIEF.md"))
		}, "BRIEF.md", "symbolic link (to /etc/shadow)"},
		{"unlisted file", func(d string) { os.WriteFile(filepath.Join(d, "extra.txt"), nil, 0o644) }, "extra.txt", "not listed in SHA256SUMS"},
		{"over the size cap", func(d string) {
			f, _ := os.Create(filepath.Join(d, "huge.bin"))
			f.Truncate(MaxFileBytes + 1) // sparse: nothing is read before the refusal
			f.Close()
		}, "huge.bin", "over the kit's limit"},
		{"fifo", func(d string) { exec.Command("mkfifo", filepath.Join(d, "pipe")).Run() }, "pipe", "not a regular file"},
		{"bad name", func(d string) { os.WriteFile(filepath.Join(d, "a b"), nil, 0o644) }, "a b", "not portable"},
		{"no manifest", func(d string) { os.Remove(filepath.Join(d, ManifestName)) }, ManifestName, "not a built kit"},
		{"manifest out of order", func(d string) {
			b, _ := os.ReadFile(filepath.Join(d, ManifestName))
			lines := strings.SplitAfter(string(b), "\n")
			lines[0], lines[1] = lines[1], lines[0]
			os.WriteFile(filepath.Join(d, ManifestName), []byte(strings.Join(lines, "")), 0o644)
		}, ManifestName, "out of order"},
		{"manifest garbage", func(d string) { os.WriteFile(filepath.Join(d, ManifestName), []byte("hello\n"), 0o644) }, ManifestName, "is not `<64 lowercase hex>  <path>`"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := buildARI(t)
			c.damage(k.Dir)
			_, err := Open(k.Dir)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), k.Dir) {
				t.Errorf("error %q; want the kit, %q and %q", err, c.file, c.want)
			}
		})
	}
}

func TestCheckNamesTheTrack(t *testing.T) {
	k := buildARI(t)
	err := k.Check(digest.Hex(strings.Repeat("0", 64)), "demo")
	if err == nil || !strings.Contains(err.Error(), "track demo pins "+strings.Repeat("0", 64)) || !strings.Contains(err.Error(), string(k.Hash)) {
		t.Errorf("hash mismatch against the track: %v", err)
	}
	if err := k.Check(k.Hash, "demo"); err != nil {
		t.Error(err)
	}
}

func TestSeedNormalisesModesAndRechecks(t *testing.T) {
	k := buildARI(t)
	os.Chmod(filepath.Join(k.Dir, "starter/train.py"), 0o700)
	ws := t.TempDir()
	if err := k.Seed(ws); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(ws, "starter/train.py"))
	if err != nil || st.Mode().Perm() != 0o664 {
		t.Errorf("seeded mode %v (%v); want 0664", st.Mode().Perm(), err)
	}
	// A kit damaged after Open is refused while it is copied, naming the file.
	os.WriteFile(filepath.Join(k.Dir, "BRIEF.md"), []byte("swapped"), 0o644)
	err = k.Seed(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "BRIEF.md") || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged kit seeded: %v", err)
	}
}

func TestInstallIsIdempotent(t *testing.T) {
	k := buildARI(t)
	store := t.TempDir()
	a, err := Install(k.Dir, store)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Install(k.Dir, store)
	if err != nil || a.Hash != b.Hash || a.Dir != filepath.Join(store, string(k.Hash)) {
		t.Fatalf("install twice: %v %v %v", a, b, err)
	}
}

func TestBuildRefusesBadSources(t *testing.T) {
	recipe := "name = \"t\"\nversion = \"1\"\nfiles = [\"BRIEF.md\", \"code.py\"]\n[validation]\nseed = 2\nquestions = 3\ncontext_bytes = 256\n"
	good := fstest.MapFS{"kit.toml": {Data: []byte(recipe)}, "BRIEF.md": {Data: []byte("# brief\n")}, "code.py": {Data: []byte("print(1)\n")}}
	if _, err := Build(good, "src", filepath.Join(t.TempDir(), "out"), BuildOptions{}); err != nil {
		t.Fatalf("good source: %v", err)
	}
	for _, c := range []struct {
		name string
		fs   fstest.MapFS
		want string
	}{
		{"missing file", fstest.MapFS{"kit.toml": good["kit.toml"], "BRIEF.md": good["BRIEF.md"]}, "src: code.py: missing"},
		{"symlink", fstest.MapFS{"kit.toml": good["kit.toml"], "BRIEF.md": good["BRIEF.md"], "code.py": {Data: []byte("/etc/passwd"), Mode: os.ModeSymlink}}, "code.py: is a symbolic link"},
		{"no recipe", fstest.MapFS{"BRIEF.md": good["BRIEF.md"]}, "kit.toml: missing"},
		{"unknown key", fstest.MapFS{"kit.toml": {Data: []byte(recipe + "colour = 1\n")}, "BRIEF.md": good["BRIEF.md"], "code.py": good["code.py"]}, "colour: unknown key"},
		{"no brief", fstest.MapFS{"kit.toml": {Data: []byte(strings.Replace(recipe, `"BRIEF.md", `, "", 1))}, "code.py": good["code.py"]}, "BRIEF.md is not listed"},
		{"escaping path", fstest.MapFS{"kit.toml": {Data: []byte(strings.Replace(recipe, `"code.py"`, `"../code.py"`, 1))}, "BRIEF.md": good["BRIEF.md"]}, "not a portable relative path"},
		{"text pin mismatch", fstest.MapFS{"kit.toml": {Data: []byte(recipe + "[[text]]\npackage = \"base-files\"\npath = \"/x.txt\"\nsha256 = \"" + strings.Repeat("0", 64) + "\"\nlicence = \"public domain\"\n")}, "BRIEF.md": good["BRIEF.md"], "code.py": good["code.py"]}, "apt-get install base-files"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			_, err := Build(c.fs, "src", out, BuildOptions{TextRoot: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v; want %q", err, c.want)
			}
			if _, serr := os.Stat(out); serr == nil {
				t.Errorf("a refused build left %s", out)
			}
		})
	}
	// A text whose bytes differ from the pin is refused, naming the package.
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "x.txt"), []byte("not the pinned text"), 0o644)
	fs := fstest.MapFS{"kit.toml": {Data: []byte(recipe + "[[text]]\npackage = \"base-files\"\npath = \"/x.txt\"\nsha256 = \"" + strings.Repeat("0", 64) + "\"\nlicence = \"public domain\"\n")}, "BRIEF.md": good["BRIEF.md"], "code.py": good["code.py"]}
	if _, err := Build(fs, "src", filepath.Join(t.TempDir(), "out"), BuildOptions{TextRoot: root}); err == nil || !strings.Contains(err.Error(), "the recipe pins") {
		t.Errorf("text drift: %v", err)
	}
	// An existing output directory is never overwritten.
	out := t.TempDir()
	if _, err := Build(good, "src", out, BuildOptions{}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("existing out: %v", err)
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(strings.Repeat("a", 64) + "  BRIEF.md\n"))
	f.Add([]byte("x  y\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := parseManifest(b)
		if err != nil {
			return
		}
		// What parses is canonical: it prints back to the same bytes.
		if got := manifestBytes(files); string(got) != string(b) {
			t.Fatalf("parse/print round trip: %q -> %q", b, got)
		}
	})
}
