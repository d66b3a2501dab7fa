package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// GPUFact is what the host's NVIDIA driver says of one CDI GPU: its model and the driver, read
// from /proc/driver/nvidia (the kernel module's own files, which exist wherever the driver is
// loaded; no nvidia-smi needed), matched to the CDI device by the minor number of its /dev/nvidiaN
// node. SpecDriver is the driver version the CDI spec was generated for (the version suffix of
// the driver libraries it mounts); a spec whose SpecDriver differs from Driver was written before
// a driver upgrade and mounts libraries that are gone or mismatched: regenerate it.
type GPUFact struct {
	Name       string `json:"name"`  // the CDI name, nvidia.com/gpu=0
	Model      string `json:"model"` // "NVIDIA H100 80GB HBM3"; "" when the driver does not say
	BusID      string `json:"bus_id,omitempty"`
	Driver     string `json:"driver"`      // the loaded kernel module's version; "" without one
	SpecDriver string `json:"spec_driver"` // the driver the CDI spec was generated for; "" unknown
	SpecFile   string `json:"spec_file"`
}

// Stale reports whether the CDI spec was generated for another driver than the loaded one.
func (f GPUFact) Stale() bool {
	return f.SpecDriver != "" && f.Driver != "" && f.SpecDriver != f.Driver
}

var (
	nvidiaNodeRE    = regexp.MustCompile(`^/dev/nvidia([0-9]+)$`)
	driverVersionRE = regexp.MustCompile(`Kernel Module(?: for [a-z0-9_]+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)`)
	libVersionRE    = regexp.MustCompile(`lib(?:cuda|nvidia-ml|nvidia-ptxjitcompiler)\.so\.([0-9]+\.[0-9]+(?:\.[0-9]+)?)$`)
)

// NVIDIADriverVersion reads the loaded driver's version from procRoot/driver/nvidia/version
// (procRoot is /proc on a host; tests give a directory of their own). "" when no driver is loaded.
func NVIDIADriverVersion(procRoot string) string {
	b, err := os.ReadFile(filepath.Join(procRoot, "driver", "nvidia", "version"))
	if err != nil {
		return ""
	}
	if m := driverVersionRE.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// nvidiaGPU is what the driver's information file says of one GPU.
type nvidiaGPU struct{ Model, BusID, UUID string }

// nvidiaGPUs reads procRoot/driver/nvidia/gpus/*/information: model, bus id and UUID by device
// minor.
func nvidiaGPUs(procRoot string) map[string]nvidiaGPU {
	out := map[string]nvidiaGPU{}
	infos, _ := filepath.Glob(filepath.Join(procRoot, "driver", "nvidia", "gpus", "*", "information"))
	for _, p := range infos {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var g nvidiaGPU
		var minor string
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch v = strings.TrimSpace(v); strings.TrimSpace(k) {
			case "Model":
				g.Model = v
			case "GPU UUID":
				g.UUID = v
			case "Device Minor":
				minor = v
			}
		}
		if minor != "" {
			g.BusID = filepath.Base(filepath.Dir(p))
			out[minor] = g
		}
	}
	return out
}

// GPUFacts describes each of the CDI devices names found in dirs, from the driver under procRoot.
// A device whose spec names no /dev/nvidiaN node (another vendor, or a test's stand-in) has no
// model; one that is not in the specs is an error.
func GPUFacts(dirs []string, procRoot string, names []string) ([]GPUFact, error) {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("read CDI specs in %s: %w", strings.Join(dirs, ", "), err)
	}
	driver := NVIDIADriverVersion(procRoot)
	gpus := nvidiaGPUs(procRoot)
	var out []GPUFact
	for _, name := range names {
		dev := cache.GetDevice(name)
		if dev == nil {
			return nil, fmt.Errorf("GPU %s is in no CDI spec in %s; list them with sealrun doctor", name, strings.Join(dirs, ", "))
		}
		spec := dev.GetSpec()
		f := GPUFact{Name: name, Driver: driver, SpecFile: spec.GetPath()}
		for _, n := range dev.ContainerEdits.DeviceNodes {
			if m := nvidiaNodeRE.FindStringSubmatch(n.Path); m != nil {
				g := gpus[m[1]]
				f.Model, f.BusID = g.Model, g.BusID
			}
		}
		for _, m := range spec.ContainerEdits.Mounts {
			if v := libVersionRE.FindStringSubmatch(m.HostPath); v != nil {
				f.SpecDriver = v[1]
				break
			}
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// GPUModelAndDriver joins facts into the attestation's host.gpu_model and host.gpu_driver: the
// models (or, where the driver does not say, the CDI names) and the driver version.
func GPUModelAndDriver(facts []GPUFact) (model, driver string) {
	var models, drivers []string
	for _, f := range facts {
		m := f.Model
		if m == "" {
			m = f.Name
		}
		models = append(models, m)
		if f.Driver != "" && !slices.Contains(drivers, f.Driver) {
			drivers = append(drivers, f.Driver)
		}
	}
	return strings.Join(models, ", "), strings.Join(drivers, ", ")
}
