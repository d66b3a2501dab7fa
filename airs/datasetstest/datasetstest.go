// Package datasetstest is a test-only stand-in for the HuggingFace datasets library, for tests of
// AIRS-Bench tasks written in upstream's format (the real library cannot be installed here).
//
// The Python package (standin/datasets) implements the calls upstream's tasks make:
// load_from_disk, save_to_disk, Dataset and DatasetDict with column_names, features, len, column
// and row indexing, remove_columns, select_columns, select, rename_column, to_list, to_dict and
// to_pandas. It stores a dataset as JSON, never Arrow; its dist-info says version
// 0.0.0+sealrun.standin, so an image carrying it is never mistaken for one with the real library.
// Image adds it to a stored image; WriteDatasetDict writes raw data in its format.
package datasetstest

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/sealrun/sealrun/images"
)

//go:embed all:standin
var standin embed.FS

// SitePackages is where Image puts the stand-in: Debian's python3 has it on sys.path.
const SitePackages = "usr/local/lib/python3.11/dist-packages"

// Name is the repository of the images Image makes.
const Name = "sealrun.test/python-datasets-standin"

// Install writes the stand-in into root/SitePackages.
func Install(root string) error {
	return fs.WalkDir(standin, "standin", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("standin", p)
		to := filepath.Join(root, SitePackages, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := standin.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}

// Image stores the image base (a name@digest in store) plus the stand-in and returns its ref;
// the image is removed when the test ends.
func Image(t testing.TB, store *images.Store, base string) string {
	t.Helper()
	_, digest, ok := cut(base)
	if !ok {
		t.Fatalf("datasetstest: %q is not name@digest", base)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	if err := Install(dir); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Join(dir, SitePackages); d != dir; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	ref, err := store.Extend(context.Background(), digest, dir, Name)
	if err != nil {
		t.Fatalf("datasetstest: extend %s: %v", base, err)
	}
	_, made, _ := cut(ref)
	t.Cleanup(func() { store.Remove(made) })
	return ref
}

func cut(ref string) (string, string, bool) {
	for i := len(ref) - 1; i >= 0; i-- {
		if ref[i] == '@' {
			return ref[:i], ref[i+1:], true
		}
	}
	return "", "", false
}

// Split is one split of a dataset dict: its columns, each the same length.
type Split map[string]any

// WriteDatasetDict writes splits as the stand-in's save_to_disk of a DatasetDict would, at dir
// (created): dataset_dict.json naming the splits (sorted), and each split's dataset.json.
func WriteDatasetDict(dir string, splits map[string]Split) error {
	var names []string
	for n := range splits {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d := filepath.Join(dir, n)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		features := map[string]string{}
		for col, v := range splits[n] {
			switch v.(type) {
			case []string:
				features[col] = "string"
			case []int:
				features[col] = "int64"
			case []float64:
				features[col] = "float64"
			default:
				return fmt.Errorf("split %s column %s: %T; use []string, []int or []float64", n, col, v)
			}
		}
		b, err := json.Marshal(map[string]any{"columns": splits[n], "features": features})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "dataset.json"), b, 0o644); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(map[string]any{"splits": names})
	return os.WriteFile(filepath.Join(dir, "dataset_dict.json"), b, 0o644)
}

// ToySentiment writes the raw data of the test task SentimentClassificationToyAccuracy
// (airs/testdata) under raw as upstream's dataset preparation lays it out:
// raw/sealrun/toy-sentiment/default. Row i's label is i % 2; its text says "good" or "bad".
func ToySentiment(raw string) error {
	split := func(n int, seed int) Split {
		var text []string
		var label []int
		fillers := []string{"the film", "a meal", "this book", "our trip", "the weather"}
		for i := range n {
			word := "bad"
			if i%2 == 1 {
				word = "good"
			}
			text = append(text, fmt.Sprintf("%s was %s", fillers[(i+seed)%len(fillers)], word))
			label = append(label, i%2)
		}
		return Split{"text": text, "label": label}
	}
	return WriteDatasetDict(filepath.Join(raw, "sealrun", "toy-sentiment", "default"), map[string]Split{"train": split(120, 1), "test": split(40, 3)})
}
