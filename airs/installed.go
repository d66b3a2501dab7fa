package airs

import (
	"fmt"
	"os"
	"path"
	"strings"
)

// sitePackages are where an image's Python keeps its distributions: Debian's, pip's, a venv's
// under /opt, conda's. Patterns are path.Match patterns relative to the image's root.
var sitePackages = []string{
	"usr/lib/python3/dist-packages",
	"usr/lib/python3*/site-packages",
	"usr/lib/python3*/dist-packages",
	"usr/local/lib/python3*/site-packages",
	"usr/local/lib/python3*/dist-packages",
	"opt/*/lib/python3*/site-packages",
	"opt/conda/lib/python3*/site-packages",
}

// Installed are the Python distributions an image's root holds: normalized name → version, from
// the names of their *.dist-info and *.egg-info entries. The root is read confined (os.Root):
// a symlink in the image never leads outside it.
func Installed(rootfs string) (map[string]string, error) {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := map[string]string{}
	for _, pat := range sitePackages {
		for _, dir := range globRoot(root, pat) {
			f, err := root.Open(dir)
			if err != nil {
				continue
			}
			names, _ := f.Readdirnames(-1)
			f.Close()
			for _, n := range names {
				base, ok := strings.CutSuffix(n, ".dist-info")
				if !ok {
					base, ok = strings.CutSuffix(n, ".egg-info")
				}
				if !ok {
					continue
				}
				name, version, _ := strings.Cut(base, "-")
				out[NormalizeName(name)] = version
			}
		}
	}
	return out, nil
}

// globRoot expands a pattern of '/'-separated parts, each matched against one directory's names.
func globRoot(root *os.Root, pattern string) []string {
	dirs := []string{"."}
	for _, part := range strings.Split(pattern, "/") {
		var next []string
		for _, d := range dirs {
			if !strings.ContainsAny(part, "*?[") {
				if st, err := root.Stat(path.Join(d, part)); err == nil && st.IsDir() {
					next = append(next, path.Join(d, part))
				}
				continue
			}
			f, err := root.Open(d)
			if err != nil {
				continue
			}
			names, _ := f.Readdirnames(-1)
			f.Close()
			for _, n := range names {
				if ok, _ := path.Match(part, n); ok {
					if st, err := root.Stat(path.Join(d, n)); err == nil && st.IsDir() {
						next = append(next, path.Join(d, n))
					}
				}
			}
		}
		dirs = next
	}
	return dirs
}

// Unmet are the requirements a set of installed distributions lacks, and notes on those present
// in another version than an exact pin (==) asks (a note, not a refusal: Debian's numpy is not
// pip's, and a task's pin is often looser in practice than in text).
func Unmet(installed map[string]string, reqs []string) (missing []Requirement, notes []string) {
	for _, s := range reqs {
		r, err := ParseRequirement(s)
		if err != nil {
			continue // validation refused it already
		}
		v, ok := installed[r.Key]
		if !ok {
			missing = append(missing, r)
			continue
		}
		if pin, exact := strings.CutPrefix(r.Spec, "=="); exact && pin != v {
			notes = append(notes, fmt.Sprintf("%s: the image has %s %s", s, r.Name, v))
		}
	}
	return missing, notes
}
