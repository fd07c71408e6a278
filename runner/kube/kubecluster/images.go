package kubecluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gantry/runner/ociimage"
	"gantry/runner/tofu"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// criNamespace is the containerd namespace the CRI plugin (and so the kubelet) sees.
const criNamespace = "k8s.io"

// ctr runs `ctr` against the cluster's containerd in the CRI namespace.
func (l layout) ctr(ctx context.Context, stdout io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", l.containerdSocket(), "--namespace", criNamespace}, args...)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Import imports an OCI image layout tar (runner/ociimage) into the cluster's containerd, under
// the name its index's io.containerd.image.name annotation gives. Pods use it with
// imagePullPolicy Never (or IfNotPresent and a tag other than latest).
func (c *Cluster) Import(ctx context.Context, layoutTar string) error {
	if err := c.l.ctr(ctx, io.Discard, "images", "import", layoutTar); err != nil {
		return fmt.Errorf("importing %s: %w", layoutTar, err)
	}
	return nil
}

// ImportImage writes img as a layout tar in a temporary file and imports it.
func (c *Cluster) ImportImage(ctx context.Context, img ociimage.Image) error {
	tmp, err := os.MkdirTemp("", "kubecluster-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	name := filepath.Join(tmp, "image.tar")
	if _, err := img.WriteLayoutFile(name); err != nil {
		return fmt.Errorf("writing image %s: %w", img.Name, err)
	}
	return c.Import(ctx, name)
}

// Images lists the names of the images in the cluster's containerd.
func (c *Cluster) Images(ctx context.Context) ([]string, error) {
	var out bytes.Buffer
	if err := c.l.ctr(ctx, &out, "images", "list", "--quiet"); err != nil {
		return nil, err
	}
	return strings.Fields(out.String()), nil
}

// ensurePauseImage builds tools/k8scluster/pause statically and imports it as PauseImage unless
// containerd (whose root survives Stop) has it already.
func (c *Cluster) ensurePauseImage(ctx context.Context, repoRoot string, log io.Writer) error {
	images, err := c.Images(ctx)
	if err != nil {
		return err
	}
	for _, name := range images {
		if name == PauseImage {
			return nil
		}
	}
	tmp, err := os.MkdirTemp("", "kubecluster-pause-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "pause")
	build := tofu.GoBuild{Label: "the pause image", Dir: repoRoot, Package: "./tools/k8scluster/pause",
		Flags: []string{"-trimpath", "-ldflags", "-s -w", "-o", bin}}
	if err := build.Run(ctx, nil, log); err != nil {
		return err
	}
	return c.ImportImage(ctx, ociimage.Image{
		Name:       PauseImage,
		Files:      []ociimage.File{{Path: "/pause", Mode: 0o755, Source: bin}},
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
	})
}

// WaitListed waits until the node's status lists image name. containerd has an imported image
// at once, and pods may use it from then on, but the node status, where the tofu/kubernetes
// executor's health looks for it, shows it only at the kubelet's next status update (up to
// its nodeStatusUpdateFrequency, 10 s, later).
func (c *Cluster) WaitListed(ctx context.Context, name string) error {
	client, err := c.Client()
	if err != nil {
		return err
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, n := range nodes.Items {
				for _, img := range n.Status.Images {
					if slices.Contains(img.Names, name) || slices.Contains(img.Names, "docker.io/"+name) {
						return nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the node status does not list image %s yet: %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}
