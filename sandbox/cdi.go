package sandbox

import (
	"debug/elf"
	"fmt"
	"path"
	"sort"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// DefaultCDIDirs are where GPU vendors' tools write CDI specs (nvidia-ctk cdi generate).
var DefaultCDIDirs = []string{"/etc/cdi", "/var/run/cdi"}

// GPUEdits are what CDI devices add to a runner or grader container.
type GPUEdits struct {
	Devices []specs.LinuxDevice
	Mounts  []specs.Mount
	Env     []string
	// Symlinks (container path -> target) stand for the hooks: the links nvidia-ctk's
	// create-symlinks hook would make, and the SONAME links (libcuda.so.1 -> libcuda.so.550.54.15)
	// its update-ldcache hook would leave, made in the container's own mount-target layer.
	Symlinks     map[string]string
	DroppedHooks []string // hooks the CDI specs asked for; sealrun never runs them as host root
}

// CDIDevices lists the fully qualified CDI device names found in dirs, and every spec file error.
func CDIDevices(dirs []string) ([]string, []error) {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, []error{err}
	}
	var errs []error
	for file, es := range cache.GetErrors() {
		for _, e := range es {
			errs = append(errs, fmt.Errorf("CDI spec %s: %w", file, e))
		}
	}
	names := cache.ListDevices()
	sort.Strings(names)
	return names, errs
}

// ResolveGPUs resolves CDI device names (vendor/class=name, for example nvidia.com/gpu=0) from
// the spec dirs into device nodes, mounts and environment for a runner or grader container.
// Hooks in the specs are dropped and reported: a hook would run as host root.
func ResolveGPUs(dirs []string, names []string) (*GPUEdits, error) {
	if len(names) == 0 {
		return &GPUEdits{}, nil
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("read CDI specs in %s: %w", strings.Join(dirs, ", "), err)
	}
	scratch := &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}
	if unresolved, err := cache.InjectDevices(scratch, names...); err != nil {
		var detail []string
		for file, es := range cache.GetErrors() {
			for _, e := range es {
				detail = append(detail, fmt.Sprintf("%s: %v", file, e))
			}
		}
		msg := fmt.Sprintf("GPU devices %v: %v", unresolved, err)
		if len(detail) > 0 {
			msg += "; invalid CDI specs: " + strings.Join(detail, "; ")
		}
		return nil, fmt.Errorf("%s; list the available devices with sealrun doctor (CDI specs are read from %s; nvidia-ctk cdi generate writes them)", msg, strings.Join(dirs, ", "))
	}
	out := &GPUEdits{Devices: scratch.Linux.Devices, Mounts: scratch.Mounts, Env: scratch.Process.Env}
	// Every container of a run has a user namespace, where no device node can be made: each one
	// is bind-mounted from the host (see Spec). A spec may keep its nodes elsewhere on the host
	// than where the container sees them (nvidia-ctk --dev-root): bind from there.
	hostPaths := map[string]string{}
	for _, name := range names {
		if dev := cache.GetDevice(name); dev != nil {
			for _, list := range [][]*cdispec.DeviceNode{dev.GetSpec().ContainerEdits.DeviceNodes, dev.ContainerEdits.DeviceNodes} {
				for _, n := range list {
					if n.HostPath != "" && n.HostPath != n.Path {
						hostPaths[n.Path] = n.HostPath
					}
				}
			}
		}
	}
	for _, d := range out.Devices {
		if hp, ok := hostPaths[d.Path]; ok {
			out.Mounts = append(out.Mounts, specs.Mount{Destination: d.Path, Type: "bind", Source: hp, Options: []string{"bind", "nosuid"}})
		}
	}
	if h := scratch.Hooks; h != nil {
		//lint:ignore SA1019 a deprecated prestart hook must still be found and dropped
		for _, list := range [][]specs.Hook{h.Prestart, h.CreateRuntime, h.CreateContainer, h.StartContainer, h.Poststart, h.Poststop} {
			for _, hk := range list {
				out.DroppedHooks = append(out.DroppedHooks, strings.Join(append([]string{hk.Path}, hk.Args...), " "))
			}
		}
	}
	out.Symlinks = hookSymlinks(out.DroppedHooks, out.Mounts)
	return out, nil
}

// hookSymlinks makes, without running anything, what the NVIDIA CDI hooks would leave in a
// container: each create-symlinks "--link TARGET::LINK", and for update-ldcache the SONAME link of
// every versioned library the specs mount (read from the library's ELF header on the host).
func hookSymlinks(hooks []string, mounts []specs.Mount) map[string]string {
	links := map[string]string{}
	ldcache := false
	for _, h := range hooks {
		f := strings.Fields(h)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "--link" {
				if target, link, ok := strings.Cut(f[i+1], "::"); ok && strings.HasPrefix(link, "/") && target != "" {
					links[path.Clean(link)] = target
				}
			}
		}
		ldcache = ldcache || strings.Contains(h, "update-ldcache")
	}
	if ldcache {
		for _, m := range mounts {
			base := path.Base(m.Destination)
			if !strings.Contains(base, ".so.") {
				continue
			}
			if so := elfSONAME(m.Source); so != "" && so != base && !strings.Contains(so, "/") {
				if _, ok := links[path.Join(path.Dir(m.Destination), so)]; !ok {
					links[path.Join(path.Dir(m.Destination), so)] = base
				}
			}
		}
	}
	return links
}

// elfSONAME reads a shared library's DT_SONAME ("" when it has none or is not ELF).
func elfSONAME(p string) string {
	f, err := elf.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 {
		return ""
	}
	return names[0]
}
