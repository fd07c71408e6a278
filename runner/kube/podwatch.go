package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// jobPod is a launched Job: a watch on its pod tells how the pod ends, and the pod's log
// is followed into the phase's log as soon as its container runs.
type jobPod struct {
	l       *JobLauncher
	spec    PodSpec
	created time.Time

	stop    context.CancelFunc
	done    chan struct{}
	exit    Exit
	err     error
	pod     string        // the Job's pod, once seen
	logDone chan struct{} // closed once the log was followed to its end (nil: not begun)
}

func newJobPod(l *JobLauncher, spec PodSpec, created time.Time) *jobPod {
	return &jobPod{l: l, spec: spec, created: created, stop: func() {}, done: make(chan struct{})}
}

// fatalWaiting are the reasons a container waits for that no wait ends: the phase fails
// at once instead of waiting for its deadline.
var fatalWaiting = map[string]bool{
	"ErrImageNeverPull": true, "InvalidImageName": true, "CreateContainerConfigError": true,
	"ErrImagePull": true, "ImagePullBackOff": true,
}

// start watches the pod in the background until it ended (or Delete).
func (p *jobPod) start(ctx context.Context) {
	ctx, p.stop = context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer close(p.done)
		p.exit, p.err = p.watch(ctx)
		if p.logDone != nil {
			// The log ends with the container; a stream the apiserver cut short must not
			// hold the phase up.
			select {
			case <-p.logDone:
			case <-time.After(10 * time.Second):
			}
		}
	}()
}

// Wait blocks until the pod ended and its log was read, or ctx ended.
func (p *jobPod) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	case <-p.done:
		return p.exit, p.err
	}
}

// Delete stops watching and deletes the Job and its Secret: in the background when the
// phase is over (its pod ended), in the foreground and until all of it is gone when wait
// (a cancelled phase, whose pod stops gracefully within its termination grace period:
// its log is followed to the end meanwhile, so what tofu says as it stops is kept).
func (p *jobPod) Delete(ctx context.Context, wait bool) error {
	defer p.stop()
	if !wait {
		p.stop()
	}
	ctx, cancel := context.WithTimeout(ctx, (terminationGrace+30)*time.Second)
	defer cancel()
	prop := metav1.DeletePropagationBackground
	if wait {
		prop = metav1.DeletePropagationForeground
	}
	if err := p.l.deleteAll(ctx, p.spec.Job, prop); err != nil || !wait {
		return err
	}
	return p.l.gone(ctx, p.spec.Job)
}

// watch follows the Job's pods (list, then watch from there; again after a watch ends)
// until its pod ended.
func (p *jobPod) watch(ctx context.Context) (Exit, error) {
	pods := p.l.cfg.Client.CoreV1().Pods(p.l.cfg.Namespace)
	sel := metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + p.spec.Job}
	startBy := time.NewTimer(time.Until(p.created.Add(p.l.cfg.PodStart)))
	defer startBy.Stop()
	for {
		list, err := pods.List(ctx, sel)
		if err != nil {
			if ctx.Err() != nil {
				return Exit{}, ctx.Err()
			}
			time.Sleep(time.Second)
			continue
		}
		for i := range list.Items {
			if exit, ended, err := p.seen(ctx, &list.Items[i], false); ended || err != nil {
				return exit, err
			}
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: sel.LabelSelector, ResourceVersion: list.ResourceVersion})
		if err != nil {
			if ctx.Err() != nil {
				return Exit{}, ctx.Err()
			}
			continue
		}
		exit, ended, err := p.events(ctx, w, startBy.C)
		w.Stop()
		if ended || err != nil {
			return exit, err
		}
	}
}

// events reads a watch until the pod ended or the watch closed.
func (p *jobPod) events(ctx context.Context, w watch.Interface, startBy <-chan time.Time) (Exit, bool, error) {
	for {
		select {
		case <-ctx.Done():
			return Exit{}, false, ctx.Err()
		case <-startBy:
			if p.pod == "" {
				return Exit{}, false, fmt.Errorf("Job %s created no pod within %s (kubectl describe job %s says why)",
					p.spec.Job, p.l.cfg.PodStart, p.spec.Job)
			}
		case ev, ok := <-w.ResultChan():
			if !ok {
				return Exit{}, false, nil // the watch timed out: list and watch again
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod || ev.Type == watch.Error {
				return Exit{}, false, nil
			}
			if exit, ended, err := p.seen(ctx, pod, ev.Type == watch.Deleted); ended || err != nil {
				return exit, ended, err
			}
		}
	}
}

// seen takes in a state of the Job's pod and says whether the pod ended, and how.
func (p *jobPod) seen(ctx context.Context, pod *corev1.Pod, deleted bool) (Exit, bool, error) {
	if p.pod == "" {
		p.pod = pod.Name
	}
	if pod.Name != p.pod {
		return Exit{}, false, nil // backoffLimit 0: the Job makes no second pod to run
	}
	var cs *corev1.ContainerStatus
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == containerName {
			cs = &pod.Status.ContainerStatuses[i]
		}
	}
	if cs != nil && p.logDone == nil && (cs.State.Running != nil || cs.State.Terminated != nil) {
		p.follow(ctx)
	}
	if cs != nil && cs.State.Waiting != nil && fatalWaiting[cs.State.Waiting.Reason] {
		return Exit{}, false, fmt.Errorf("the phase's pod cannot start: %s: %s", cs.State.Waiting.Reason, cs.State.Waiting.Message)
	}
	var exit Exit
	ended := false
	if cs != nil && cs.State.Terminated != nil {
		t := cs.State.Terminated
		exit = Exit{ExitCode: int(t.ExitCode), OOMKilled: t.Reason == "OOMKilled", Message: t.Message}
		ended = true
	}
	switch {
	case pod.Status.Reason == "Evicted":
		exit.Gone, ended = "evicted: "+pod.Status.Message, true
	case pod.Status.Phase == corev1.PodFailed && !ended:
		exit.Gone, ended = fmt.Sprintf("the pod failed: %s %s", pod.Status.Reason, pod.Status.Message), true
	case deleted || pod.DeletionTimestamp != nil:
		if !ended && !deleted {
			return Exit{}, false, nil // being deleted: its container is stopping
		}
		exit.Gone, ended = "the pod was deleted", true
	}
	if ended && exit.Gone != "" && !exit.OOMKilled {
		// The Job's deadline ends its pod too: that is a time limit, not an interruption.
		if p.deadlineExceeded(ctx) {
			exit = Exit{ExitCode: exit.ExitCode, DeadlineExceeded: true, Deadline: p.spec.Timeout}
		}
	}
	return exit, ended, nil
}

// deadlineExceeded reports whether the Job failed for its activeDeadlineSeconds.
func (p *jobPod) deadlineExceeded(ctx context.Context) bool {
	j, err := p.l.cfg.Client.BatchV1().Jobs(p.l.cfg.Namespace).Get(ctx, p.spec.Job, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue && c.Reason == batchv1.JobReasonDeadlineExceeded {
			return true
		}
	}
	return false
}

// follow copies the container's log into the phase's log until the container ends.
func (p *jobPod) follow(ctx context.Context) {
	p.logDone = make(chan struct{})
	go func() {
		defer close(p.logDone)
		pods := p.l.cfg.Client.CoreV1().Pods(p.l.cfg.Namespace)
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			var stream io.ReadCloser
			stream, err = pods.GetLogs(p.pod, &corev1.PodLogOptions{Container: containerName, Follow: true}).Stream(ctx)
			if err == nil {
				_, err = io.Copy(p.spec.Log, stream)
				stream.Close()
				return
			}
			if ctx.Err() != nil {
				return
			}
			// The container may have just started: the kubelet serves its log a moment later.
			time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			p.l.cfg.Logger.WarnContext(ctx, "following the phase's pod log failed; its log arrives when the phase ends", "job", p.spec.Job, "error", err)
		}
	}()
}
