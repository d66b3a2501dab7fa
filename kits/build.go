package kits

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/internal/fileio"
)

// Sources are the kits' sources as this sealrun was built with them: ari/ (the ARI kit's recipe
// and starter code) and demo-agent/ (the scripted demo scaffold). The scaffolds of real agents
// (opencode, Codex, Claude Code, ...) are the scaffolds package's.
//
//go:embed ari demo-agent
var Sources embed.FS

// ARI is the ARI kit's source directory inside Sources.
func ARI() fs.FS {
	sub, _ := fs.Sub(Sources, "ari")
	return sub
}

// RecipeName is the recipe file of a kit's source directory.
const RecipeName = "kit.toml"

// Recipe is a kit's kit.toml.
type Recipe struct {
	Name      string       `toml:"name"`
	Version   string       `toml:"version"`
	Files     []string     `toml:"files"`
	Text      []TextSource `toml:"text"`
	Synthetic struct {
		Seed      uint64 `toml:"seed"`
		Questions int    `toml:"questions"`
	} `toml:"synthetic"`
	Validation struct {
		Seed         uint64 `toml:"seed"`
		Questions    int    `toml:"questions"`
		ContextBytes int    `toml:"context_bytes"`
	} `toml:"validation"`
}

// TextSource is one public text of the training data, from a Debian package.
type TextSource struct {
	Package string `toml:"package"`
	Path    string `toml:"path"`
	SHA256  string `toml:"sha256"`
	Licence string `toml:"licence"`
}

// The files a build writes besides the recipe's.
const (
	TrainPath      = "data/train.txt"
	SourcesPath    = "data/SOURCES.md"
	ValidationPath = "validation.sealrun"
)

// ParseRecipe reads and checks a kit.toml; every problem is reported, each as file: key: what. It
// is long because it is one rule per key of kit.toml, in KIT.md's order.
func ParseRecipe(name string, data []byte) (*Recipe, error) {
	var r Recipe
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&r)
	if err != nil {
		return nil, fmt.Errorf("%s: %v; see kits/KIT.md for the recipe format", name, err)
	}
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", name, key, fmt.Sprintf(format, args...)))
	}
	for _, k := range md.Undecoded() {
		bad(k.String(), "unknown key; the recipe has name, version, files, [[text]], [synthetic], [validation] (kits/KIT.md)")
	}
	if r.Name == "" || !pathRE.MatchString(r.Name) || strings.Contains(r.Name, "/") {
		bad("name", "%q: give a short name (letters, digits, '.', '_', '-')", r.Name)
	}
	if r.Version == "" {
		bad("version", "missing")
	}
	seen := map[string]bool{}
	for i, f := range r.Files {
		key := fmt.Sprintf("files[%d]", i)
		switch {
		case !pathRE.MatchString(f) || len(f) > MaxPathBytes:
			bad(key, "%q is not a portable relative path", f)
		case seen[f]:
			bad(key, "%q is listed twice", f)
		case f == ManifestName || f == TrainPath || f == SourcesPath || f == ValidationPath:
			bad(key, "%q is written by the build itself", f)
		}
		seen[f] = true
	}
	if !seen["BRIEF.md"] {
		bad("files", "BRIEF.md is not listed; every kit has a brief")
	}
	for i, t := range r.Text {
		key := fmt.Sprintf("text[%d]", i)
		if t.Package == "" || t.Licence == "" {
			bad(key, "package and licence are required: say where the text comes from and why it may be copied")
		}
		if !filepath.IsAbs(t.Path) {
			bad(key+".path", "%q: give the absolute path the package installs", t.Path)
		}
		if len(t.SHA256) != 64 || strings.Trim(t.SHA256, "0123456789abcdef") != "" {
			bad(key+".sha256", "%q is not 64 lowercase hex (sha256sum of the file)", t.SHA256)
		}
	}
	if r.Synthetic.Questions < 0 || r.Synthetic.Questions > 1_000_000 {
		bad("synthetic.questions", "%d out of range 0..1000000", r.Synthetic.Questions)
	}
	if r.Validation.Questions < 1 || r.Validation.Questions > exams.DefaultMaxQuestions {
		bad("validation.questions", "%d out of range 1..%d", r.Validation.Questions, exams.DefaultMaxQuestions)
	}
	if r.Validation.ContextBytes < 1 || r.Validation.ContextBytes > exams.MaxContextBytes {
		bad("validation.context_bytes", "%d out of range 1..%d", r.Validation.ContextBytes, exams.MaxContextBytes)
	}
	if r.Validation.Seed == r.Synthetic.Seed && r.Synthetic.Questions > 0 {
		bad("validation.seed", "equals synthetic.seed: the validation set would be in the training text")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &r, nil
}

// BuildOptions configure Build.
type BuildOptions struct {
	// TextRoot is prefixed to the text sources' paths (default "/"); tests point it elsewhere.
	TextRoot string
	// Log receives progress lines (default: discarded).
	Log io.Writer
}

// Build builds the kit whose source is src (a directory with kit.toml) into out, which must not
// exist: the recipe's files verbatim, the training text, the validation set, data/SOURCES.md and
// SHA256SUMS. The same source and texts give the same bytes and so the same hash on every
// machine. out appears only complete (it is built beside it and renamed).
func Build(src fs.FS, srcName, out string, o BuildOptions) (*Kit, error) {
	if o.TextRoot == "" {
		o.TextRoot = "/"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	recipeData, err := readSource(src, srcName, RecipeName)
	if err != nil {
		return nil, err
	}
	r, err := ParseRecipe(path.Join(srcName, RecipeName), recipeData)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("kit build: %s already exists; give a new directory (or remove it)", out)
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(out)), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(out)), "."+filepath.Base(out)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("kit build: %w", err)
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o755)

	kw := &kitWriter{dir: tmp, out: out}
	for _, f := range r.Files {
		data, err := readSource(src, srcName, f)
		if err != nil {
			return nil, err
		}
		if err := kw.put(f, data); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(o.Log, "kit %s: training text from %d Debian texts and %d synthetic questions (seed %d)\n", r.Name, len(r.Text), r.Synthetic.Questions, r.Synthetic.Seed)
	train, sources, err := trainingText(r, path.Join(srcName, RecipeName), o.TextRoot)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "kit %s: validation set of %d questions (seed %d)\n", r.Name, r.Validation.Questions, r.Validation.Seed)
	val, err := validationSet(r)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		rel  string
		data []byte
	}{{TrainPath, train}, {SourcesPath, sources}, {ValidationPath, val}} {
		if err := kw.put(f.rel, f.data); err != nil {
			return nil, err
		}
	}

	if err := kw.finish(); err != nil {
		return nil, err
	}
	return Open(out)
}

// kitWriter writes a kit's files into its directory under construction and lists them.
type kitWriter struct {
	dir, out string // the directory being written, and the kit's final one it is renamed to
	files    []File
}

func (kw *kitWriter) put(rel string, data []byte) error {
	if int64(len(data)) > MaxFileBytes {
		return &Error{Dir: kw.out, File: rel, Problem: fmt.Sprintf("would be %d bytes, over the kit's limit of %d bytes per file", len(data), MaxFileBytes), Fix: "make the recipe smaller"}
	}
	p := filepath.Join(kw.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	kw.files = append(kw.files, File{Path: rel, SHA256: digest.HexOf(sum[:]), Size: int64(len(data))})
	return nil
}

// finish writes SHA256SUMS, makes the kit durable and renames it to its final name.
func (kw *kitWriter) finish() error {
	sort.Slice(kw.files, func(i, j int) bool { return kw.files[i].Path < kw.files[j].Path })
	if err := os.WriteFile(filepath.Join(kw.dir, ManifestName), manifestBytes(kw.files), 0o644); err != nil {
		return err
	}
	if err := fileio.SyncTree(kw.dir); err != nil {
		return err
	}
	if err := os.Rename(kw.dir, kw.out); err != nil {
		return fmt.Errorf("kit build: %w", err)
	}
	return nil
}

// trainingText is the kit's training text (the recipe's Debian texts, whole and in order, then
// its synthetic documents) and data/SOURCES.md, which says where each part came from. recipe
// names the recipe in errors.
func trainingText(r *Recipe, recipe, textRoot string) (train, sources []byte, err error) {
	var tb bytes.Buffer
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Where %s comes from\n\nBuilt by `sealrun kit build` from the recipe `kit.toml` of kit %s version %s.\n\n", TrainPath, r.Name, r.Version)
	fmt.Fprintf(&sb, "## Public text from Debian packages (whole files, unmodified, in this order)\n\n| package | file | sha256 | licence |\n|---|---|---|---|\n")
	for i, t := range r.Text {
		data, err := readText(textRoot, t)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: text[%d]: %w", recipe, i, err)
		}
		tb.Write(data)
		tb.WriteString("\n\n")
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", t.Package, t.Path, t.SHA256, t.Licence)
	}
	docs := exams.Synthesize(r.Synthetic.Seed, r.Synthetic.Questions)
	for _, d := range docs {
		tb.WriteString(d.Text)
		tb.WriteString("\n\n")
	}
	fmt.Fprintf(&sb, "\n## Synthetic documents\n\n%d documents (%d questions' worth) of the exam families (%s) from `exams.Synthesize` with seed %d — the generator `sealrun exam synth` uses, with a seed no exam or validation set of this project uses. Synthetic text is generated, not copied: no licence applies.\n",
		len(docs), r.Synthetic.Questions, strings.Join(exams.Families, ", "), r.Synthetic.Seed)
	return tb.Bytes(), []byte(sb.String()), nil
}

// validationSet is the kit's public validation set, an exam file synthesized from the recipe's
// seed.
func validationSet(r *Recipe) ([]byte, error) {
	var vdocs bytes.Buffer
	if err := exams.WriteDocuments(&vdocs, exams.Synthesize(r.Validation.Seed, r.Validation.Questions)); err != nil {
		return nil, err
	}
	qs, err := exams.ReadDocuments("validation", &vdocs, exams.WithContextBytes(r.Validation.ContextBytes))
	if err != nil {
		return nil, err
	}
	var vbuf bytes.Buffer
	if _, err := exams.Encode(&vbuf, qs, r.Validation.ContextBytes); err != nil {
		return nil, err
	}
	return vbuf.Bytes(), nil
}

// readSource reads one file of a kit's source, refusing anything but a regular file: a symlink
// (which could point out of the kit), a directory or a device.
func readSource(src fs.FS, srcName, name string) ([]byte, error) {
	st, err := fs.Lstat(src, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &Error{Dir: srcName, File: name, Problem: "missing", Fix: "restore it, or take it out of " + RecipeName}
		}
		return nil, &Error{Dir: srcName, File: name, Problem: err.Error()}
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, _ := fs.ReadLink(src, name)
		return nil, &Error{Dir: srcName, File: name, Problem: fmt.Sprintf("is a symbolic link (to %s); a kit's source holds regular files only", target), Fix: "copy the file in instead of linking it"}
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{Dir: srcName, File: name, Problem: fmt.Sprintf("is a %s, not a regular file", st.Mode().Type()), Fix: "give a file"}
	}
	if st.Size() > MaxFileBytes {
		return nil, &Error{Dir: srcName, File: name, Problem: fmt.Sprintf("is %d bytes, over the kit's limit of %d bytes per file", st.Size(), MaxFileBytes), Fix: "make it smaller or leave it out"}
	}
	return fs.ReadFile(src, name)
}

// readText reads one Debian text and checks its pin.
func readText(root string, t TextSource) ([]byte, error) {
	p := filepath.Join(root, t.Path)
	st, err := os.Lstat(p)
	if err != nil {
		return nil, fmt.Errorf("%s (package %s) is not here (%v); install it: apt-get install %s", t.Path, t.Package, err, t.Package)
	}
	if !st.Mode().IsRegular() || st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%s (package %s) is not a regular file under %d bytes", t.Path, t.Package, MaxFileBytes)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != t.SHA256 {
		return nil, fmt.Errorf("%s (package %s) has sha256 %s, the recipe pins %s: this machine's %s differs from the one the kit was made with, so the kit would not be the same; install that version, or change the pin (a new kit, and a new track)", t.Path, t.Package, got, t.SHA256, t.Package)
	}
	return data, nil
}
