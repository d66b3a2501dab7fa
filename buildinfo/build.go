package buildinfo

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
)

// SeamEnv are sealrund's test-seam variables: honoured only by a test build (TestSeams), and a
// release build refuses to start while any is set.
var SeamEnv = []string{"SEALRUND_TEST_ENTRYPOINT", "SEALRUND_TEST_OVERLAY", "SEALRUND_TEST_HOLD", "SEALRUND_TEST_KILL_AFTER"}

// toolchain is the C compiler and C library make build used ("gcc-14.2.0,glibc-2.41"), stamped
// with -ldflags -X; "" in a go build that did not.
var toolchain string

var (
	buildOnce sync.Once
	buildInfo attest.Build
	buildErr  error
)

// CurrentBuild describes the running binary for attestations: version and commit (from the
// linker flags, or the Go build's VCS stamp), whether the tree had uncommitted changes, the Go
// version, the SHA-256 of the executable and whether test seams are compiled in.
func CurrentBuild(version, commit string) (attest.Build, error) {
	buildOnce.Do(func() {
		b := attest.Build{Version: version, Commit: commit, GoVersion: runtime.Version(), TestSeams: TestSeams, Toolchain: toolchain}
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					if b.Commit == "" || b.Commit == "unknown" || strings.HasPrefix(s.Value, b.Commit) {
						b.Commit = s.Value
					}
				case "vcs.modified":
					b.Modified = s.Value == "true"
				}
			}
			if b.Version == "" || b.Version == "dev" {
				if v := bi.Main.Version; v != "" && v != "(devel)" {
					b.Version = v
				}
			}
		}
		if b.Version == "" {
			b.Version = "dev"
		}
		// make build stamps `git describe --dirty`: a tree with uncommitted changes says so even
		// where the Go build's own VCS stamp is off (-buildvcs=false).
		if strings.HasSuffix(b.Version, "-dirty") {
			b.Modified = true
		}
		exe, err := os.Executable()
		if err == nil {
			b.DaemonSHA256, err = fileio.SHA256(exe)
		}
		if err != nil {
			buildErr = fmt.Errorf("hash the sealrund binary for the attestations: %w", err)
		}
		buildInfo = b
	})
	return buildInfo, buildErr
}

// CheckSeamEnv refuses SEALRUND_TEST_* in a release build (sealrund checks it before anything
// else): a seam set at run time is never silently ignored, nor honoured.
func CheckSeamEnv() error {
	var set []string
	for _, k := range SeamEnv {
		if _, ok := os.LookupEnv(k); ok {
			set = append(set, k)
		}
	}
	if len(set) == 0 || TestSeams {
		return nil
	}
	return fmt.Errorf("%s set, but this sealrund is a release build: test seams are not compiled in (only builds made with -tags sealrun_testseams, which the tests make, have them); unset %s", strings.Join(set, ", "), strings.Join(set, " and "))
}

// HelperHashes are the SHA-256 of the binaries sealrund runs beside it, by name (those that
// exist): what Build.Helpers records.
func HelperHashes(paths map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for name, p := range paths {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			continue // not installed (the shim and the relay are optional)
		}
		h, err := fileio.SHA256(p)
		if err != nil {
			return nil, fmt.Errorf("hash %s (%s) for the attestations: %w", name, p, err)
		}
		out[name] = h
	}
	return out, nil
}
