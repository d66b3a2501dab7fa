package airs

import (
	"fmt"
	"regexp"
	"strings"
)

// Requirement is one entry of a task's Python requirement lists, as pip reads the common form:
// a distribution name, optional extras, an optional version specifier ("datasets==4.0.0",
// "torchmetrics", "scikit-learn>=1.3").
type Requirement struct {
	Name string // as written
	// Key is the name normalized as pip compares names (PEP 503: lower case, runs of -_.
	// as one -).
	Key  string
	Spec string // the version specifier as written, "" for any version
}

var (
	reqRE     = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[[A-Za-z0-9._,\s-]*\])?\s*((===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+(\s*,\s*(===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+)*)?\s*$`)
	normKeyRE = regexp.MustCompile(`[-_.]+`)
)

// ParseRequirement reads one requirement; an error says what it is not.
func ParseRequirement(s string) (Requirement, error) {
	m := reqRE.FindStringSubmatch(s)
	if m == nil || len(s) > 200 {
		return Requirement{}, fmt.Errorf("%q is not a requirement; write a package name with an optional version, one per entry, for example datasets==4.0.0 or pandas", clip(s))
	}
	return Requirement{Name: m[1], Key: NormalizeName(m[1]), Spec: strings.ReplaceAll(m[4], " ", "")}, nil
}

// NormalizeName is a distribution name as pip compares it (PEP 503).
func NormalizeName(name string) string {
	return normKeyRE.ReplaceAllString(strings.ToLower(name), "-")
}

// DebianPackages maps Python distributions (normalized names) to the Debian bookworm packages
// that provide them. A distribution not here has no Debian package in bookworm (datasets,
// torchmetrics, rouge-score, sktime …): an operator installs it with pip in an image built
// elsewhere.
var DebianPackages = map[string]string{
	"numpy":             "python3-numpy",
	"pandas":            "python3-pandas",
	"torch":             "python3-torch",
	"scipy":             "python3-scipy",
	"scikit-learn":      "python3-sklearn",
	"sklearn":           "python3-sklearn",
	"pyyaml":            "python3-yaml",
	"yaml":              "python3-yaml",
	"tqdm":              "python3-tqdm",
	"matplotlib":        "python3-matplotlib",
	"networkx":          "python3-networkx",
	"nltk":              "python3-nltk",
	"requests":          "python3-requests",
	"pillow":            "python3-pil",
	"h5py":              "python3-h5py",
	"statsmodels":       "python3-statsmodels",
	"sympy":             "python3-sympy",
	"regex":             "python3-regex",
	"joblib":            "python3-joblib",
	"sentencepiece":     "python3-sentencepiece",
	"rdkit":             "python3-rdkit",
	"biopython":         "python3-biopython",
	"seaborn":           "python3-seaborn",
	"xgboost":           "python3-xgboost",
	"lightgbm":          "python3-lightgbm",
	"filelock":          "python3-filelock",
	"fsspec":            "python3-fsspec",
	"psutil":            "python3-psutil",
	"packaging":         "python3-packaging",
	"typing-extensions": "python3-typing-extensions",
}

// DebianPlan is how a Debian-based image can satisfy a list of requirements.
type DebianPlan struct {
	Packages []string      // Debian packages to install, python3 first
	Unmet    []Requirement // requirements Debian has no package for
	// Pinned are requirements met by a Debian package whose version the requirement pins:
	// Debian's version may differ (bookworm's, not the pin).
	Pinned []Requirement
}

// PlanDebian maps requirement lists onto Debian packages.
func PlanDebian(lists ...[]string) (DebianPlan, error) {
	p := DebianPlan{Packages: []string{"python3"}}
	seen := map[string]bool{"python3": true}
	seenReq := map[string]bool{}
	for _, list := range lists {
		for _, s := range list {
			r, err := ParseRequirement(s)
			if err != nil {
				return p, err
			}
			if seenReq[r.Key+r.Spec] {
				continue
			}
			seenReq[r.Key+r.Spec] = true
			pkg, ok := DebianPackages[r.Key]
			if !ok {
				p.Unmet = append(p.Unmet, r)
				continue
			}
			if r.Spec != "" {
				p.Pinned = append(p.Pinned, r)
			}
			if !seen[pkg] {
				seen[pkg] = true
				p.Packages = append(p.Packages, pkg)
				if pkg == "python3-torch" && !seen["libopenblas0-pthread"] {
					seen["libopenblas0-pthread"] = true
					p.Packages = append(p.Packages, "libopenblas0-pthread")
				}
			}
		}
	}
	return p, nil
}
