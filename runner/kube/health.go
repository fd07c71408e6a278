package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Health reports whether Jobs can run now: the cluster answers, the namespace exists,
// and the runner image is on a Ready node (the node status' image list; the image is
// never pulled, so a node without it cannot run a phase). Where the portal may not read
// namespaces or nodes (a Role limited to its namespace), that check is skipped rather
// than failed: the Jobs themselves need neither permission.
func (l *JobLauncher) Health(ctx context.Context) error {
	// /version with the caller's deadline (the discovery client's ServerVersion takes none).
	if err := l.cfg.Client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return fmt.Errorf("the cluster does not answer: %w", err)
	}
	if _, err := l.cfg.Client.CoreV1().Namespaces().Get(ctx, l.cfg.Namespace, metav1.GetOptions{}); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("namespace %s does not exist", l.cfg.Namespace)
		case !apierrors.IsForbidden(err):
			return fmt.Errorf("reading namespace %s: %w", l.cfg.Namespace, err)
		}
	}
	nodes, err := l.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing the nodes: %w", err)
	}
	var ready []string
	for _, n := range nodes.Items {
		if !nodeReady(n) {
			continue
		}
		ready = append(ready, n.Name)
		if hasImage(n, l.cfg.Image) {
			return nil
		}
	}
	if len(ready) == 0 {
		return fmt.Errorf("no node of the cluster is Ready")
	}
	return fmt.Errorf("the runner image %s is on no Ready node (%s): import it (go tool task k8s:image); it is never pulled",
		l.cfg.Image, strings.Join(ready, ", "))
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// hasImage reports whether the node lists image among its images (by any of its names;
// containerd names an imported image docker.io/... when it has no registry host).
func hasImage(n corev1.Node, image string) bool {
	for _, img := range n.Status.Images {
		if slices.ContainsFunc(img.Names, func(name string) bool { return name == image || name == "docker.io/"+image }) {
			return true
		}
	}
	return false
}
