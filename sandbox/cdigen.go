package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// The NVIDIA CDI spec sealrun writes for a host without NVIDIA's Container Toolkit (nvidia-ctk):
// the same devices, names and driver files nvidia-ctk's spec gives a container, found the way
// the driver itself shows them, and no hooks (sealrun never runs a CDI hook as host root).

// NVIDIACDIFile is where sealrun writes its spec: beside nvidia-ctk's /etc/cdi/nvidia.yaml,
// under a name of its own (two specs naming the same device are refused: keep one of them).
const NVIDIACDIFile = "/etc/cdi/sealrun-nvidia.json"

// NVIDIACDI is a generated spec and what it was made from.
type NVIDIACDI struct {
	Spec      *cdispec.Spec
	Driver    string   // the driver version the spec's libraries are for
	GPUs      []string // the CDI names, nvidia.com/gpu=0 ...
	Libraries []string // host paths of the driver libraries it mounts
	Binaries  []string // host paths of the driver's programs it mounts (nvidia-smi)
}

// Where driver libraries and programs are looked for, under the host root: the distributions'
// library directories, then the driver folder some GPU machines mount (/usr/local/nvidia).
var (
	nvidiaLibDirs = []string{"usr/lib/x86_64-linux-gnu", "usr/lib64", "lib64", "usr/lib", "lib/x86_64-linux-gnu",
		"usr/local/nvidia/lib64", "usr/local/nvidia/lib"}
	nvidiaBinDirs = []string{"usr/bin", "usr/local/bin", "usr/local/nvidia/bin", "bin"}
	// The driver's user-space libraries (each carries the driver's version as its suffix).
	nvidiaLibRE  = regexp.MustCompile(`^lib(?:cuda|cudadebugger|nvidia-[a-z0-9_-]+|nvcuvid|nvoptix)\.so\.([0-9]+\.[0-9]+(?:\.[0-9]+)?)$`)
	gpuMinorRE   = regexp.MustCompile(`^nvidia([0-9]+)$`)
	nvidiaUUIDRE = regexp.MustCompile(`^GPU-[0-9a-fA-F-]{8,64}$`)
)

// libDir is where a container gets the driver's libraries: the multiarch directory every
// glibc on amd64 searches, whatever the host used.
const libDir = "/usr/lib/x86_64-linux-gnu"

// GenerateNVIDIACDI reads the NVIDIA driver under root ("/" on a host; tests give a directory of
// stand-ins): its GPUs (/proc/driver/nvidia/gpus, else the /dev/nvidiaN nodes), its control
// nodes, its version (/proc/driver/nvidia/version, else the libraries' suffix), its libraries of
// that version and nvidia-smi; and makes the spec, checked by the CDI library's own parser.
func GenerateNVIDIACDI(root string) (*NVIDIACDI, error) {
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("host root %s is not a directory (give / on a GPU host)", root)
	}
	under := func(p string) string { return filepath.Join(root, p) }
	isDev := func(p string) bool {
		fi, err := os.Stat(under(p))
		return err == nil && fi.Mode()&os.ModeDevice != 0
	}
	// The GPUs, by device minor; their UUIDs where the driver shows them.
	type gpu struct {
		minor int
		uuid  string
	}
	var gpus []gpu
	for minor, g := range nvidiaGPUs(under("proc")) {
		n, err := strconv.Atoi(minor)
		if err != nil || n < 0 || n > 255 {
			continue // not a minor the driver gives
		}
		if !nvidiaUUIDRE.MatchString(g.UUID) {
			g.UUID = "" // never a name that is not a GPU's UUID
		}
		gpus = append(gpus, gpu{minor: n, uuid: g.UUID})
	}
	if len(gpus) == 0 { // no /proc/driver/nvidia (some sandboxes show only the nodes)
		ents, _ := os.ReadDir(under("dev"))
		for _, e := range ents {
			if m := gpuMinorRE.FindStringSubmatch(e.Name()); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil && n < 256 {
					gpus = append(gpus, gpu{minor: n})
				}
			}
		}
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("no NVIDIA GPU under %s: neither %s nor %s exists; is the NVIDIA driver loaded (nvidia-smi)?", root, under("proc/driver/nvidia/gpus"), under("dev/nvidia0"))
	}
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].minor < gpus[j].minor })
	for _, g := range gpus {
		if n := fmt.Sprintf("dev/nvidia%d", g.minor); !isDev(n) {
			return nil, fmt.Errorf("the driver shows GPU minor %d but %s is not a device node; load the driver's device nodes (nvidia-modprobe, or nvidia-smi once as root)", g.minor, under(n))
		}
	}
	if !isDev("dev/nvidiactl") {
		return nil, fmt.Errorf("%s is not a device node: the NVIDIA driver's control device is missing; load the driver (nvidia-smi once as root)", under("dev/nvidiactl"))
	}

	// The driver's libraries: each of the driver's version, found once (the first directory wins).
	driver := NVIDIADriverVersion(under("proc"))
	libs := map[string]string{} // base name -> host path
	versions := map[string]bool{}
	for _, d := range nvidiaLibDirs {
		ents, _ := os.ReadDir(under(d))
		for _, e := range ents {
			m := nvidiaLibRE.FindStringSubmatch(e.Name())
			if m == nil || (driver != "" && m[1] != driver) {
				continue
			}
			// The driver installs each versioned library as a file; a link of that name could
			// point anywhere on the host, and is not mounted.
			p := filepath.Join(under(d), e.Name())
			if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if _, seen := libs[e.Name()]; !seen {
				libs[e.Name()] = p
				versions[m[1]] = true
			}
		}
	}
	if driver == "" {
		if len(versions) != 1 {
			vs := make([]string, 0, len(versions))
			for v := range versions {
				vs = append(vs, v)
			}
			sort.Strings(vs)
			return nil, fmt.Errorf("the driver's version is not in %s, and its libraries under %s show %d versions (%s): give the host's own driver (nvidia-smi shows its version)", under("proc/driver/nvidia/version"), root, len(vs), strings.Join(vs, ", "))
		}
		for v := range versions {
			driver = v
		}
	}
	if _, ok := libs["libcuda.so."+driver]; !ok {
		return nil, fmt.Errorf("libcuda.so.%s (the CUDA driver library) is in none of %s under %s: install the driver's user-space libraries", driver, strings.Join(nvidiaLibDirs, ", "), root)
	}

	out := &NVIDIACDI{Driver: driver}
	edits := cdispec.ContainerEdits{Env: []string{"NVIDIA_VISIBLE_DEVICES=void"}}
	for _, n := range []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"} {
		if isDev("dev/" + n) {
			edits.DeviceNodes = append(edits.DeviceNodes, &cdispec.DeviceNode{Path: "/dev/" + n, HostPath: under("dev/" + n)})
		}
	}
	names := make([]string, 0, len(libs))
	for n := range libs {
		names = append(names, n)
	}
	sort.Strings(names)
	ro := []string{"ro", "nosuid", "nodev", "bind"}
	for _, n := range names {
		host := libs[n]
		out.Libraries = append(out.Libraries, host)
		edits.Mounts = append(edits.Mounts, &cdispec.Mount{HostPath: host, ContainerPath: path.Join(libDir, n), Options: ro})
		// Its SONAME too (libcuda.so.1), the name programs load it by: nvidia-ctk's ldcache
		// hook would leave that link; a second mount of the same file needs no hook.
		if so := sonameAlias(host, n); so != "" {
			edits.Mounts = append(edits.Mounts, &cdispec.Mount{HostPath: host, ContainerPath: path.Join(libDir, so), Options: ro})
		}
	}
	for _, d := range nvidiaBinDirs {
		p := under(path.Join(d, "nvidia-smi"))
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			out.Binaries = append(out.Binaries, p)
			edits.Mounts = append(edits.Mounts, &cdispec.Mount{HostPath: p, ContainerPath: "/usr/bin/nvidia-smi", Options: ro})
			break
		}
	}
	spec := &cdispec.Spec{Version: "0.5.0", Kind: "nvidia.com/gpu", ContainerEdits: edits}
	node := func(g gpu) *cdispec.DeviceNode {
		p := fmt.Sprintf("/dev/nvidia%d", g.minor)
		return &cdispec.DeviceNode{Path: p, HostPath: under(p)}
	}
	var all []*cdispec.DeviceNode
	for i, g := range gpus {
		spec.Devices = append(spec.Devices, cdispec.Device{Name: strconv.Itoa(i), ContainerEdits: cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{node(g)}}})
		out.GPUs = append(out.GPUs, "nvidia.com/gpu="+strconv.Itoa(i))
		if g.uuid != "" {
			spec.Devices = append(spec.Devices, cdispec.Device{Name: g.uuid, ContainerEdits: cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{node(g)}}})
		}
		all = append(all, node(g))
	}
	spec.Devices = append(spec.Devices, cdispec.Device{Name: "all", ContainerEdits: cdispec.ContainerEdits{DeviceNodes: all}})
	out.GPUs = append(out.GPUs, "nvidia.com/gpu=all")
	out.Spec = spec
	// What any CDI consumer reads it with must take it: the CDI library's own reader, on the
	// bytes that are written.
	if err := checkCDISpec(out.JSON(), len(spec.Devices)); err != nil {
		return nil, fmt.Errorf("the generated CDI spec is not valid: %w", err)
	}
	return out, nil
}

// JSON is the spec as written to a CDI directory.
func (c *NVIDIACDI) JSON() []byte { return append(mustJSONIndent(c.Spec), '\n') }

// sonameAlias is the library's SONAME where it is another name of the same library
// (libcuda.so.1 for libcuda.so.580.95.05): "" when it has none, is the file's own name, or
// names another library (a stand-in's or a broken file's SONAME must never shadow the image's).
func sonameAlias(hostPath, name string) string {
	so := elfSONAME(hostPath)
	stem, _, _ := strings.Cut(name, ".so.")
	if so == "" || so == name || strings.Contains(so, "/") || !strings.HasPrefix(so, stem+".so.") {
		return ""
	}
	return so
}

// checkCDISpec reads spec bytes with the CDI library as sealrun reads /etc/cdi (a cache over a
// directory holding them) and wants devices devices and no error.
func checkCDISpec(b []byte, devices int) error {
	dir, err := os.MkdirTemp("", "sealrun-cdi-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), b, 0o644); err != nil {
		return err
	}
	names, errs := CDIDevices([]string{dir})
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(names) != devices {
		return fmt.Errorf("the CDI library lists %d devices in it (%s), not %d", len(names), strings.Join(names, ", "), devices)
	}
	return nil
}

func mustJSONIndent(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

// CDISpecFile is the spec file in dirs that defines the CDI device name, "" where none does.
func CDISpecFile(dirs []string, name string) string {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return ""
	}
	if d := cache.GetDevice(name); d != nil {
		return d.GetSpec().GetPath()
	}
	return ""
}
