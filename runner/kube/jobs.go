package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"gantry/runner/oci"
)

// Labels on every Job, pod and Secret the executor makes: a restarted portal finds its
// own by replica (Sweep), people find a run's.
const (
	LabelName      = "app.kubernetes.io/name" // gantry-runner: what a NetworkPolicy selects
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelReplica   = "gantry.dev/replica"
	LabelRun       = "gantry.dev/run"
	LabelPhase     = "gantry.dev/phase"
	managedBy      = "gantry"
	// containerName is the pod's only container.
	containerName = "phase"
)

// Defaults of JobConfig.
const (
	DefaultTTLAfterFinished = 5 * time.Minute
	DefaultPodStart         = 2 * time.Minute
	// terminationGrace is what a deleted pod gets before SIGKILL: at SIGTERM
	// gantry-phase interrupts an apply's tofu (SIGINT, as a terminal's Ctrl-C), which
	// stops gracefully and stores the state it wrote within tofurun.StopGrace (20 s) or
	// is killed (a plan's at once); the rest is the margin for gantry-phase to exit.
	terminationGrace = 30
	// workSize bounds the pod's emptyDir: working directory, providers, plan files.
	workSize = "2Gi"
)

// JobConfig is where and how the Jobs run.
type JobConfig struct {
	Client    kubernetes.Interface
	Namespace string
	// Image is the runner image (by its content tag), already on the nodes: it is
	// never pulled.
	Image string
	// Replica is this portal's --replica-id, the label its Jobs carry.
	Replica string
	// Limits are each pod's memory and CPU limits (zero fields take oci's defaults).
	Limits oci.Limits
	// TTLAfterFinished is the Job's ttlSecondsAfterFinished: the cluster removes a Job
	// a dead portal left (zero: DefaultTTLAfterFinished).
	TTLAfterFinished time.Duration
	// PodStart bounds the wait for the Job's pod to be created (zero: DefaultPodStart).
	PodStart time.Duration
	Logger   *slog.Logger
}

// JobLauncher launches each phase as a batch/v1 Job (Launcher).
type JobLauncher struct{ cfg JobConfig }

// NewJobLauncher checks cfg.
func NewJobLauncher(cfg JobConfig) (*JobLauncher, error) {
	var missing []string
	if cfg.Client == nil {
		missing = append(missing, "Client")
	}
	if cfg.Namespace == "" {
		missing = append(missing, "Namespace")
	}
	if cfg.Image == "" {
		missing = append(missing, "Image")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("kubernetes executor: %s not set", strings.Join(missing, ", "))
	}
	if cfg.Limits.MemoryBytes <= 0 {
		cfg.Limits.MemoryBytes = oci.DefaultMemoryBytes
	}
	if cfg.Limits.CPUs <= 0 {
		cfg.Limits.CPUs = oci.DefaultCPUs
	}
	if cfg.TTLAfterFinished <= 0 {
		cfg.TTLAfterFinished = DefaultTTLAfterFinished
	}
	if cfg.PodStart <= 0 {
		cfg.PodStart = DefaultPodStart
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &JobLauncher{cfg: cfg}, nil
}

// labelValueRe is what a label value may hold.
var labelValueRe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// ReplicaLabel is a replica id as a label value: its safe characters, or, when that
// is not a valid value (too long, or changed), a prefix and a hash of the id.
func ReplicaLabel(replica string) string {
	v := strings.Trim(labelValueRe.ReplaceAllString(replica, "_"), "_.-")
	if v == replica && len(v) <= 63 && v != "" {
		return v
	}
	sum := sha256.Sum256([]byte(replica))
	return strings.Trim(v[:min(len(v), 40)], "_.-") + "-" + hex.EncodeToString(sum[:8])
}

func (l *JobLauncher) labels(spec PodSpec) map[string]string {
	m := map[string]string{LabelName: "gantry-runner", LabelComponent: "runner", LabelManagedBy: managedBy,
		LabelReplica: ReplicaLabel(l.cfg.Replica), LabelPhase: spec.Phase}
	if v := labelValueRe.ReplaceAllString(spec.RunID, "_"); v != "" && len(v) <= 63 {
		m[LabelRun] = v
	}
	return m
}

// job is the phase's Job, suspended: it runs once its Secret exists (Launch).
func (l *JobLauncher) job(spec PodSpec) *batchv1.Job {
	labels := l.labels(spec)
	// Memory is requested as it is limited (a pod is never evicted for going over its
	// request); CPU is limited to the executor's CPUs but requested at a tenth of them: a
	// phase mostly waits on the cloud, and a node should not refuse phases for CPU it would
	// leave idle.
	mem := resource.NewQuantity(l.cfg.Limits.MemoryBytes, resource.BinarySI)
	cpu := resource.NewMilliQuantity(int64(l.cfg.Limits.CPUs*1000), resource.DecimalSI)
	cpuRequest := resource.NewMilliQuantity(max(int64(l.cfg.Limits.CPUs*100), 10), resource.DecimalSI)
	limits := corev1.ResourceList{corev1.ResourceMemory: *mem, corev1.ResourceCPU: *cpu}
	requests := corev1.ResourceList{corev1.ResourceMemory: *mem, corev1.ResourceCPU: *cpuRequest}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range spec.Env {
			if !yield(k) {
				return
			}
		}
	})
	var env []corev1.EnvVar
	for _, k := range names {
		env = append(env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
	}
	workLimit := resource.MustParse(workSize)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Job, Namespace: l.cfg.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			Suspend:                 ptr.To(true),
			BackoffLimit:            ptr.To[int32](0),
			Completions:             ptr.To[int32](1),
			Parallelism:             ptr.To[int32](1),
			TTLSecondsAfterFinished: ptr.To(int32(l.cfg.TTLAfterFinished.Seconds())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					AutomountServiceAccountToken:  ptr.To(false),
					EnableServiceLinks:            ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](terminationGrace),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](RunnerUID),
						RunAsGroup:     ptr.To[int64](RunnerUID),
						FSGroup:        ptr.To[int64](RunnerUID),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            containerName,
						Image:           l.cfg.Image,
						ImagePullPolicy: corev1.PullNever,
						Command:         []string{ImagePhase},
						Args:            spec.Args,
						Env:             env,
						WorkingDir:      WorkMount,
						Resources:       corev1.ResourceRequirements{Requests: requests, Limits: limits},
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot:             ptr.To(true),
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Privileged:               ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "secrets", MountPath: SecretMount, ReadOnly: true},
							{Name: "work", MountPath: WorkMount},
						},
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}},
					Volumes: []corev1.Volume{
						{Name: "secrets", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: spec.Job, DefaultMode: ptr.To[int32](0o440)}}},
						{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &workLimit}}},
					},
				},
			},
		},
	}
	if spec.Timeout > 0 {
		j.Spec.ActiveDeadlineSeconds = ptr.To(int64(spec.Timeout.Seconds()))
	}
	return j
}

// secret is the phase's Secret, owned by its Job: the garbage collector deletes it with
// the Job, and a foreground deletion of the Job waits for it.
func (l *JobLauncher) secret(spec PodSpec, owner *batchv1.Job) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Job, Namespace: l.cfg.Namespace, Labels: l.labels(spec),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: owner.Name, UID: owner.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Immutable: ptr.To(true),
		Type:      corev1.SecretTypeOpaque,
		Data:      spec.Secrets,
	}
}

// Launch creates the Job suspended, then its Secret owned by it, then resumes it: the
// pod never starts before its Secret exists, and the Secret never exists without an
// owner that takes it away.
func (l *JobLauncher) Launch(ctx context.Context, spec PodSpec) (Pod, error) {
	jobs := l.cfg.Client.BatchV1().Jobs(l.cfg.Namespace)
	created, err := jobs.Create(ctx, l.job(spec), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating Job %s: %w", spec.Job, err)
	}
	p := newJobPod(l, spec, created.CreationTimestamp.Time)
	if _, err := l.cfg.Client.CoreV1().Secrets(l.cfg.Namespace).Create(ctx, l.secret(spec, created), metav1.CreateOptions{}); err != nil {
		return nil, errors.Join(fmt.Errorf("creating the Secret of Job %s: %w", spec.Job, err), p.Delete(context.WithoutCancel(ctx), false))
	}
	resume := []byte(`{"spec":{"suspend":false}}`)
	if _, err := jobs.Patch(ctx, spec.Job, types.StrategicMergePatchType, resume, metav1.PatchOptions{}); err != nil {
		return nil, errors.Join(fmt.Errorf("resuming Job %s: %w", spec.Job, err), p.Delete(context.WithoutCancel(ctx), false))
	}
	p.start(ctx)
	return p, nil
}

// deleteAll deletes the Job (its pods go with it, by propagation) and its Secret.
func (l *JobLauncher) deleteAll(ctx context.Context, name string, propagation metav1.DeletionPropagation) error {
	var errs []error
	err := l.cfg.Client.CoreV1().Secrets(l.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting Secret %s: %w", name, err))
	}
	err = l.cfg.Client.BatchV1().Jobs(l.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &propagation})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting Job %s: %w", name, err))
	}
	return errors.Join(errs...)
}

// gone waits until the Job, its pods and its Secret are all gone (or ctx ends).
func (l *JobLauncher) gone(ctx context.Context, name string) error {
	for {
		left, err := l.leftovers(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name}, name)
		if err == nil && len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("still there: %s", strings.Join(left, ", "))
			}
			return fmt.Errorf("waiting for Job %s to be gone: %w", name, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// leftovers lists what still exists of Job name: the Job, its pods, its Secret.
func (l *JobLauncher) leftovers(ctx context.Context, pods metav1.ListOptions, name string) ([]string, error) {
	var left []string
	if _, err := l.cfg.Client.BatchV1().Jobs(l.cfg.Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
		left = append(left, "job/"+name)
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	if _, err := l.cfg.Client.CoreV1().Secrets(l.cfg.Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
		left = append(left, "secret/"+name)
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	list, err := l.cfg.Client.CoreV1().Pods(l.cfg.Namespace).List(ctx, pods)
	if err != nil {
		return nil, err
	}
	for _, p := range list.Items {
		left = append(left, "pod/"+p.Name)
	}
	return left, nil
}

// Sweep deletes every Job and Secret this replica's earlier process left (a portal that
// died mid-phase): called before this process runs any phase. Another replica's are
// never touched.
func (l *JobLauncher) Sweep(ctx context.Context) (int, error) {
	sel := metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + managedBy + "," + LabelReplica + "=" + ReplicaLabel(l.cfg.Replica)}
	jobs, err := l.cfg.Client.BatchV1().Jobs(l.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return 0, fmt.Errorf("listing this replica's Jobs: %w", err)
	}
	secrets, err := l.cfg.Client.CoreV1().Secrets(l.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return 0, fmt.Errorf("listing this replica's Secrets: %w", err)
	}
	names := map[string]bool{}
	for _, j := range jobs.Items {
		names[j.Name] = true
	}
	for _, s := range secrets.Items {
		names[s.Name] = true
	}
	var errs []error
	for name := range names {
		errs = append(errs, l.deleteAll(ctx, name, metav1.DeletePropagationBackground))
	}
	return len(names), errors.Join(errs...)
}
