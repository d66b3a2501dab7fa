package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/sandbox"
)

// objects are the manifests' documents, decoded strictly (an unknown or misspelt field, a value
// of the wrong type, fails) into the API types the API server decodes them into.
type objects struct {
	configMaps map[string]*corev1.ConfigMap
	daemonSet  *appsv1.DaemonSet
	job        *batchv1.Job
	pvcs       map[string]*corev1.PersistentVolumeClaim
	namespaces []string
}

func load(t *testing.T) objects {
	t.Helper()
	o := objects{configMaps: map[string]*corev1.ConfigMap{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}}
	files, _ := filepath.Glob("*.yaml")
	if len(files) != 2 {
		t.Fatalf("manifests: %v; want sealrund.yaml and seeds-job.yaml", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---$`).Split(string(data), -1) {
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			var obj any
			switch head.APIVersion + " " + head.Kind {
			case "v1 Namespace":
				obj = &corev1.Namespace{}
			case "v1 ConfigMap":
				obj = &corev1.ConfigMap{}
			case "v1 PersistentVolumeClaim":
				obj = &corev1.PersistentVolumeClaim{}
			case "apps/v1 DaemonSet":
				obj = &appsv1.DaemonSet{}
			case "batch/v1 Job":
				obj = &batchv1.Job{}
			default:
				t.Fatalf("%s, document %d: %q %q is no kind this test knows", f, i+1, head.APIVersion, head.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s, document %d (%s): not a valid %s: %v", f, i+1, head.Kind, head.Kind, err)
			}
			switch v := obj.(type) {
			case *corev1.Namespace:
				o.namespaces = append(o.namespaces, v.Name)
			case *corev1.ConfigMap:
				o.configMaps[v.Name] = v
			case *corev1.PersistentVolumeClaim:
				o.pvcs[v.Name] = v
			case *appsv1.DaemonSet:
				o.daemonSet = v
			case *batchv1.Job:
				o.job = v
			}
			if m := metaOf(obj); m != "" && m != "sealrun" && head.Kind != "Namespace" {
				t.Errorf("%s: %s in namespace %q; want sealrun", f, head.Kind, m)
			}
		}
	}
	if o.daemonSet == nil || o.job == nil || !slices.Contains(o.namespaces, "sealrun") {
		t.Fatal("the manifests lack the DaemonSet, the Job or the sealrun namespace")
	}
	return o
}

func metaOf(obj any) string {
	switch v := obj.(type) {
	case *corev1.ConfigMap:
		return v.Namespace
	case *corev1.PersistentVolumeClaim:
		return v.Namespace
	case *appsv1.DaemonSet:
		return v.Namespace
	case *batchv1.Job:
		return v.Namespace
	}
	return ""
}

// checkPod: every mount names a volume of the pod, every container has a name and an image.
func checkPod(t *testing.T, what string, spec corev1.PodSpec) map[string]corev1.Volume {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
		if c.Name == "" || c.Image == "" {
			t.Errorf("%s: a container without a name or an image: %+v", what, c)
		}
		for _, m := range c.VolumeMounts {
			if _, ok := vols[m.Name]; !ok {
				t.Errorf("%s: container %s mounts volume %q, which the pod does not have", what, c.Name, m.Name)
			}
		}
	}
	return vols
}

func mountOf(t *testing.T, c corev1.Container, path string) corev1.VolumeMount {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return m
		}
	}
	t.Errorf("container %s mounts nothing at %s", c.Name, path)
	return corev1.VolumeMount{}
}

func grace(p *int64) string {
	if p == nil {
		return "unset: 30 s"
	}
	return fmt.Sprintf("%d s", *p)
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

// The DaemonSet runs sealrund with what it needs of the node and a configuration it accepts;
// the Job's pods reach that sealrund's socket and run the Slurm job script with Slurm's
// variables filled from Kubernetes'.
func TestManifests(t *testing.T) {
	o := load(t)

	ds := o.daemonSet
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("DaemonSet: its selector %s=%s does not select its own pods (labels %v)", k, v, ds.Spec.Template.Labels)
		}
	}
	dvols := checkPod(t, "DaemonSet", ds.Spec.Template.Spec)
	if !ds.Spec.Template.Spec.HostPID {
		t.Error("DaemonSet: hostPID is off: a restarted sealrund's pod would take its runs' containers down with it")
	}
	if ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		t.Errorf("DaemonSet: update strategy %q; want OnDelete (a rolling update restarts sealrund under running runs)", ds.Spec.UpdateStrategy.Type)
	}
	var sealrund corev1.Container
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "sealrund" {
			sealrund = c
		}
	}
	if sc := sealrund.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Error("DaemonSet: sealrund is not privileged: it makes namespaces, cgroups, mounts and loop devices")
	}
	cm := o.configMaps["sealrun-config"]
	if cm == nil {
		t.Fatal("no ConfigMap sealrun-config")
	}
	// sealrund accepts it, but for the files a node has and this machine does not: the binaries
	// beside sealrund (its image's), the node's key (the init container's) and the provider's
	// key (the Secret).
	text := cm.Data["sealrun.toml"]
	if _, err := hostconfig.Parse("sealrun.toml", []byte(text)); err != nil {
		var ce *hostconfig.Error
		if !errors.As(err, &ce) {
			t.Fatalf("sealrund refuses the ConfigMap's sealrun.toml: %v", err)
		}
		for _, p := range ce.Problems {
			key, _, _ := strings.Cut(strings.TrimPrefix(p, "sealrun.toml:"), ":")
			if !strings.Contains(p, "no such file or directory") || !slices.Contains([]string{"runner", "hook", "keys.signing", "keys.public", "providers.openai.key_file"}, key) {
				t.Errorf("sealrund refuses the ConfigMap's sealrun.toml: %s", p)
			}
		}
	}
	var cfg hostconfig.Config
	if _, err := toml.Decode(text, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.StateDir == "" || cfg.RunDir == "" || cfg.Socket == "" {
		t.Fatal("sealrun.toml: give state_dir, run_dir and socket: the mounts below are checked against them")
	}
	if !strings.HasPrefix(sandbox.DefaultNetnsDir, cfg.RunDir+"/") {
		t.Errorf("the gateway namespaces' directory %s is not under run_dir %s, which the DaemonSet mounts Bidirectional", sandbox.DefaultNetnsDir, cfg.RunDir)
	}
	for path, propagate := range map[string]bool{cfg.StateDir: true, cfg.RunDir: true, "/sys/fs/cgroup": false, "/dev": false, "/etc/cdi": false} {
		m := mountOf(t, sealrund, path)
		v := dvols[m.Name]
		if v.HostPath == nil || v.HostPath.Path != path {
			t.Errorf("DaemonSet: %s is not the node's own %s (%+v)", path, path, v.VolumeSource)
		}
		if propagate && (m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional) {
			t.Errorf("DaemonSet: %s must be mounted Bidirectional: sealrund's mounts there (rootfs, workspaces, netns) must be the node's", path)
		}
	}
	for _, f := range []string{cfg.Keys.Signing, cfg.Keys.Public, cfg.Providers["openai"].KeyFile} {
		found := false
		for _, m := range sealrund.VolumeMounts {
			if strings.HasPrefix(f, m.MountPath+"/") {
				found = true
			}
		}
		if !found {
			t.Errorf("DaemonSet: %s (sealrun.toml) is under no mount of sealrund", f)
		}
	}

	job := o.job
	spec := job.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion {
		t.Error("Job: not Indexed: the completion index is the seed")
	}
	pod := spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("Job: restartPolicy %q; want Never (a pod failure policy needs it, and a retry is a new pod)", pod.RestartPolicy)
	}
	jvols := checkPod(t, "Job", pod)
	if len(pod.Containers) != 1 {
		t.Fatalf("Job: %d containers; want 1", len(pod.Containers))
	}
	seed := pod.Containers[0]
	env := envOf(seed)
	if e := env["SLURM_ARRAY_TASK_ID"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
		t.Errorf("Job: SLURM_ARRAY_TASK_ID is not the completion index: %+v", e)
	}
	if got := env["SEALRUN_SOCKET"].Value; got != cfg.Socket {
		t.Errorf("Job: SEALRUN_SOCKET=%s; sealrund's socket is %s", got, cfg.Socket)
	}
	sock := mountOf(t, seed, filepath.Dir(cfg.Socket))
	if v := jvols[sock.Name]; v.HostPath == nil || v.HostPath.Path != filepath.Dir(cfg.Socket) {
		t.Errorf("Job: the socket's directory is not the node's %s: %+v", filepath.Dir(cfg.Socket), v.VolumeSource)
	}
	results := mountOf(t, seed, env["SEALRUN_RESULTS"].Value)
	if v := jvols[results.Name]; v.PersistentVolumeClaim == nil || o.pvcs[v.PersistentVolumeClaim.ClaimName] == nil ||
		!slices.Contains(o.pvcs[v.PersistentVolumeClaim.ClaimName].Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("Job: the results directory is not a ReadWriteMany claim of these manifests: %+v", v.VolumeSource)
	}
	if _, ok := seed.Resources.Limits["nvidia.com/gpu"]; !ok {
		t.Error("Job: the pod asks for no GPU: the device plugin would give its GPUs to another pod while the run uses them")
	}
	var wait int
	fmt.Sscan(env["SEALRUN_CANCEL_WAIT"].Value, &wait)
	if pod.TerminationGracePeriodSeconds == nil || int64(wait) >= *pod.TerminationGracePeriodSeconds {
		t.Errorf("Job: SEALRUN_CANCEL_WAIT=%d is not under the grace period (%s): the kubelet kills the pod before its run is gathered", wait, grace(pod.TerminationGracePeriodSeconds))
	}
	if sc := pod.SecurityContext; sc == nil || len(sc.SupplementalGroups) == 0 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("Job: the pod must run as a non-root user in the group of sealrund's socket")
	}

	// The exit codes the pod failure policy gives up on are those the script calls refusals and
	// usage errors; exit 4 (invalid) is retried.
	script, err := os.ReadFile("../slurm/sealrun-seed.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	var failIndex []int32
	if spec.PodFailurePolicy != nil {
		for _, r := range spec.PodFailurePolicy.Rules {
			if r.Action == batchv1.PodFailurePolicyActionFailIndex && r.OnExitCodes != nil {
				failIndex = append(failIndex, r.OnExitCodes.Values...)
			}
		}
	}
	if !slices.Equal(failIndex, []int32{1, 2}) || !bytes.Contains(script, []byte("#   1  FAILED 1:0 refused")) || !bytes.Contains(script, []byte("#   2  FAILED 2:0 usage")) {
		t.Errorf("Job: indexes failed for good on exit codes %v; want the script's refusals and usage errors, 1 and 2", failIndex)
	}
	if spec.BackoffLimitPerIndex == nil || *spec.BackoffLimitPerIndex < 1 {
		t.Error("Job: an invalid seed (exit 4) is never retried")
	}
	// The script the pod runs is the Slurm job script, from the ConfigMap the comment makes.
	cmd := strings.Join(seed.Command, " ")
	if !strings.Contains(cmd, "/opt/sealrun/sealrun-seed.sbatch") {
		t.Errorf("Job: the pod runs %q, not the job script", cmd)
	}
	m := mountOf(t, seed, "/opt/sealrun")
	job2, _ := os.ReadFile("seeds-job.yaml")
	if v := jvols[m.Name]; v.ConfigMap == nil || !strings.Contains(string(job2), "create configmap "+v.ConfigMap.Name+" --from-file=deploy/slurm/sealrun-seed.sbatch") {
		t.Errorf("Job: /opt/sealrun is not the ConfigMap of deploy/slurm/sealrun-seed.sbatch: %+v", v.VolumeSource)
	}
	// Every setting the pod gives the script is one it reads.
	for name := range env {
		if !bytes.Contains(script, []byte("${"+name)) {
			t.Errorf("Job: it sets %s, which the script never reads", name)
		}
	}
}

// The page says plainly, at its top, that this is a design no cluster has run.
func TestReadmeSaysNotYetRun(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	head := strings.Join(strings.SplitN(string(b), "\n", 8)[:7], "\n")
	if !strings.Contains(head, "not yet run") {
		t.Errorf("README.md's first lines do not say the design is not yet run:\n%s", head)
	}
	for _, f := range []string{"sealrund.yaml", "seeds-job.yaml"} {
		if !strings.Contains(string(b), "("+f+")") {
			t.Errorf("README.md does not link %s", f)
		}
		data, _ := os.ReadFile(f)
		if !strings.Contains(string(data), "NOT YET RUN") {
			t.Errorf("%s does not say it is not yet run", f)
		}
	}
}
