package sandbox

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// crun compiles a spec's seccomp profile with libseccomp at every start (a millisecond or more
// of each container's here) and keeps the program it loaded in the container's state directory
// (seccomp.bpf, for `crun exec`). A container's profile depends on its role alone, so sealrun
// takes the program crun compiled for the first container of a profile and hands it to the
// later ones through crun's run.oci.seccomp_bpf_data annotation, which crun loads in place of
// compiling the spec's section. Nothing is weakened if it does not: the spec keeps its whole
// seccomp section, and a crun that ignores the annotation compiles that, the same profile.
//
// The program is crun's own output for exactly this profile: it is keyed by the crun binary,
// its version and the digest of the profile as the spec carries it, read from the runtime's
// state directory (root's alone), and kept in memory only, so nothing another process wrote
// between two sealrun processes is ever loaded. The filter is tested from inside on a
// container that got it this way (TestKernelSurfaces under crun).
const crunSeccompAnnotation = "run.oci.seccomp_bpf_data"

// crunSeccompPrograms: key (crunSeccompKey) -> the program, base64 as the annotation takes it.
var crunSeccompPrograms sync.Map

// maxSeccompProgram is the kernel's limit on a classic BPF program (BPF_MAXINSNS
// instructions of 8 bytes).
const maxSeccompProgram = 4096 * 8

// crunSeccompKey is the cache key of the spec's seccomp profile under this runtime, or "" when
// there is nothing to cache (not crun, or no profile).
func (r *Runtime) crunSeccompKey(s *specs.Spec) string {
	if r.Kind != KindCrun || s.Linux == nil || s.Linux.Seccomp == nil {
		return ""
	}
	b, err := json.Marshal(s.Linux.Seccomp)
	if err != nil {
		return ""
	}
	d := sha256.Sum256(b)
	return r.Path + "\x00" + r.VersionLine + "\x00" + hex.EncodeToString(d[:])
}

// useCompiledSeccomp annotates the spec with the program crun compiled for the same profile
// before, if there is one, and returns the profile's key ("" when it is not crun's to cache).
func (r *Runtime) useCompiledSeccomp(s *specs.Spec) string {
	key := r.crunSeccompKey(s)
	if key == "" {
		return ""
	}
	if prog, ok := crunSeccompPrograms.Load(key); ok {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[crunSeccompAnnotation] = prog.(string)
	}
	return key
}

// keepCompiledSeccomp keeps the program crun compiled for container id under key, once the
// container is registered (crun writes it before its status). A program that is missing,
// empty, not whole instructions or over the kernel's limit is not kept: the next container
// compiles its own.
func (r *Runtime) keepCompiledSeccomp(id, key string) {
	if key == "" {
		return
	}
	if _, ok := crunSeccompPrograms.Load(key); ok {
		return
	}
	b, err := os.ReadFile(filepath.Join(r.root, id, "seccomp.bpf"))
	if err != nil || len(b) == 0 || len(b)%8 != 0 || len(b) > maxSeccompProgram {
		return
	}
	crunSeccompPrograms.Store(key, base64.StdEncoding.EncodeToString(b))
}
