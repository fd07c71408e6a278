package tofurun

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gantry/runner/oci"
	"gantry/runner/tofu"
)

// Paths inside the OCI executor's rootfs and containers.
const (
	ociTofu      = "/bin/tofu"
	ociFwd       = "/bin/fwd"
	ociMirror    = "/tofu/mirror"
	ociCLIConfig = "/tofu/tofurc.hcl"
	ociHome      = "/tmp" // HOME and TMPDIR: the per-run tmpfs (go-plugin puts its sockets there)
	ociStateDir  = "/run/state"
	ociCloudDir  = "/run/cloud"
	ociPlugins   = "/tofu/plugin-cache" // the job's plugin cache, mounted read-only
	ociSecrets   = "/run/secrets"       // the job's secret directory, mounted read-only
	// ociMinID is where the search for a job uid/gid starts: far above the ids of
	// host users and system accounts.
	ociMinID = 200000
)

// OCIConfig configures the OCI executor.
type OCIConfig struct {
	// Toolchain holds the host paths of tofu, the packed provider mirror ... (see
	// tofu.PrepareToolchain). Toolchain.CLIConfig is not used: the rootfs gets its own,
	// pointing at the mirror's path inside the container.
	Toolchain tofu.Toolchain
	// Fwd is the host path of a static gantry-fwd binary (see tofu.BuildFwd).
	Fwd string
	// RootfsDir is where the shared read-only rootfs is prepared (by NewOCI; reused).
	RootfsDir string
	// StateSocket is the host unix socket serving Gantry's state backend. Inside the
	// container, fwd (PID 1) listens on 127.0.0.1:StatePort and forwards every connection
	// to it. The socket must be connectable by the job's uid, an otherwise unused uid:
	// mode 0666 (or o+w) in a directory with o+x. Its directory is bind-mounted
	// read-only at /run/state, so it should hold nothing but sockets.
	StateSocket string
	// StatePort is the port of the state backend address in the generated
	// configurations (http://127.0.0.1:<StatePort>/state/<ws>). A saved plan embeds that
	// address and is applied on the host's view of it too, so the portal's BaseURL must
	// be exactly http://127.0.0.1:<StatePort> for isolated runs.
	StatePort int
	// CloudSocket is the host unix socket of the sandbox cloud, reached from the
	// container as SANDBOX_ENDPOINT=unix:///run/cloud/<name>; the same rules as for
	// StateSocket apply. Its directory is bind-mounted read-only at /run/cloud.
	CloudSocket string
	// Limits of every command (zero fields take oci's defaults).
	Limits oci.Limits
	// Timeout of every command (0: none; the job's context still applies).
	Timeout time.Duration
	// Executor holds the runc settings (roots); nil means oci's defaults.
	Executor *oci.Executor
}

// OCI runs every tofu command in a fresh runc container (runner/oci): a read-only
// rootfs with only tofu, fwd and the provider mirror, an unused uid, no capabilities,
// its own network namespace whose only ways out are the state and cloud sockets, and
// memory, pids, cpu and time limits. The job's directory is its /workspace.
type OCI struct {
	cfg    OCIConfig
	exec   *oci.Executor
	rootfs string
}

// NewOCI checks cfg and prepares the shared rootfs in cfg.RootfsDir: /bin/tofu,
// /bin/fwd, the packed provider mirror at /tofu/mirror, /tofu/tofurc.hcl (installs
// only from that mirror), /tmp with mode 1777, /workspace, /run/state, /run/cloud and
// /etc/passwd+group. Files are replaced atomically, so preparing a rootfs that running
// jobs use is safe. The sockets need not exist yet (Health checks them).
func NewOCI(ctx context.Context, cfg OCIConfig) (*OCI, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var missing []string
	for name, v := range map[string]string{"Toolchain.Tofu": cfg.Toolchain.Tofu, "Toolchain.Mirror": cfg.Toolchain.Mirror,
		"Fwd": cfg.Fwd, "RootfsDir": cfg.RootfsDir, "StateSocket": cfg.StateSocket, "CloudSocket": cfg.CloudSocket} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("oci executor: %s not set", strings.Join(missing, ", "))
	}
	if cfg.StatePort <= 0 || cfg.StatePort > 65535 {
		return nil, fmt.Errorf("oci executor: StatePort %d is not a port", cfg.StatePort)
	}
	for _, s := range []*string{&cfg.StateSocket, &cfg.CloudSocket} {
		abs, err := filepath.Abs(*s)
		if err != nil {
			return nil, err
		}
		*s = abs
	}
	if cfg.StateSocket == cfg.CloudSocket {
		return nil, errors.New("oci executor: StateSocket and CloudSocket are the same socket")
	}
	rootfs, err := filepath.Abs(cfg.RootfsDir)
	if err != nil {
		return nil, err
	}
	files := map[string]string{ociTofu: cfg.Toolchain.Tofu, ociFwd: cfg.Fwd}
	err = filepath.WalkDir(cfg.Toolchain.Mirror, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
			return err // skips directories, symlinks and BuildMirror's temporary files
		}
		rel, err := filepath.Rel(cfg.Toolchain.Mirror, p)
		if err != nil {
			return err
		}
		files[ociMirror+"/"+filepath.ToSlash(rel)] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("oci executor: reading the provider mirror: %w", err)
	}
	// The CLI config must name the mirror's path inside the container.
	tmp, err := os.MkdirTemp("", "gantry-tofurc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	files[ociCLIConfig] = filepath.Join(tmp, "tofurc.hcl")
	if err := tofu.WriteCLIConfig(files[ociCLIConfig], ociMirror); err != nil {
		return nil, err
	}
	if err := oci.PrepareRootfs(rootfs, files); err != nil {
		return nil, fmt.Errorf("oci executor: preparing the rootfs: %w", err)
	}
	// Mountpoints PrepareRootfs does not make (it has /run/state and /run/secrets).
	for _, d := range []string{ociCloudDir, ociStateDir, ociPlugins} {
		p := filepath.Join(rootfs, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chmod(p, 0o755); err != nil {
			return nil, err
		}
	}
	// The job's uid is an "other" to every file: whatever the umask did to the
	// directories PrepareRootfs made for the files, the job must read the mirror and the
	// CLI config and run the binaries (and only root may change any of it).
	for _, f := range []string{ociTofu, ociFwd} {
		if err := os.Chmod(filepath.Join(rootfs, f), 0o755); err != nil {
			return nil, err
		}
	}
	err = filepath.WalkDir(filepath.Join(rootfs, "tofu"), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return os.Chmod(p, 0o755)
		case d.Type().IsRegular():
			return os.Chmod(p, 0o644)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("oci executor: rootfs permissions: %w", err)
	}
	x := cfg.Executor
	if x == nil {
		x = &oci.Executor{}
	}
	return &OCI{cfg: cfg, exec: x, rootfs: rootfs}, nil
}

func (o *OCI) Name() string   { return "oci" }
func (o *OCI) Isolated() bool { return true }

// Health checks runc and the cgroups (oci.Executor.Health), the rootfs, and that both
// sockets exist, are connectable by an unprivileged uid and accept connections.
func (o *OCI) Health(ctx context.Context) error {
	if err := o.exec.Health(ctx); err != nil {
		return err
	}
	for _, f := range []string{ociTofu, ociFwd, ociCLIConfig} {
		st, err := os.Stat(filepath.Join(o.rootfs, f))
		if err != nil {
			return fmt.Errorf("rootfs %s: %w", o.rootfs, err)
		}
		if f != ociCLIConfig && st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("rootfs %s: %s is not executable by the job's uid (%s)", o.rootfs, f, st.Mode())
		}
	}
	st, err := os.Stat(filepath.Join(o.rootfs, "tmp"))
	if err != nil || st.Mode().Perm() != 0o777 || st.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("rootfs %s: /tmp must have mode 1777 (%v)", o.rootfs, err)
	}
	for _, s := range []struct{ what, path string }{{"state socket", o.cfg.StateSocket}, {"cloud socket", o.cfg.CloudSocket}} {
		if err := socketUsable(ctx, s.path); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// socketUsable checks that path is a unix socket an unprivileged other uid can connect
// to (the socket o+w, its directory o+x) and that something accepts connections on it.
func socketUsable(ctx context.Context, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s is not a unix socket", path)
	}
	if st.Mode().Perm()&0o002 == 0 {
		return fmt.Errorf("%s has mode %s: the job's uid cannot connect (chmod 0666)", path, st.Mode().Perm())
	}
	dst, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return err
	}
	if dst.Mode().Perm()&0o001 == 0 {
		return fmt.Errorf("%s has mode %s: the job's uid cannot reach the socket in it (chmod o+x)", filepath.Dir(path), dst.Mode().Perm())
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(dctx, "unix", path)
	if err != nil {
		return err
	}
	return c.Close()
}

// Run runs `tofu c.Args...` in a fresh container with workdir as /workspace. PID 1 is
// fwd, which forwards 127.0.0.1:StatePort to the state socket and exits with tofu's
// exit code (128+signal when a signal killed it). The state credentials reach the
// container only as environment (runc reads config.json from a FIFO, so they never touch
// the disk); the workload token is a file of the job's secret directory, mounted
// read-only at /run/secrets and lent to the container's uid while it runs, which the
// refresher may replace meanwhile.
// The files tofu creates in workdir belong to workdir's owner again afterwards.
// SecretsAt: a container sees the job's secret directory at /run/secrets.
func (o *OCI) SecretsAt(string) string { return ociSecrets }

// NoEgress: a container's network namespace has only loopback; the state backend and the
// sandbox cloud are reached through sockets.
func (o *OCI) NoEgress() bool { return true }

func (o *OCI) Run(ctx context.Context, workdir string, c Command) (exit int, explain string, err error) {
	id, err := jobID()
	if err != nil {
		return 0, "", err
	}
	uid, err := unusedJobID()
	if err != nil {
		return 0, "", err
	}
	env := append(tofu.Env(ociCLIConfig, ociHome), "SANDBOX_ENDPOINT=unix://"+ociCloudDir+"/"+filepath.Base(o.cfg.CloudSocket))
	names := make([]string, 0, len(c.Secrets))
	for k := range c.Secrets {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return 0, "", fmt.Errorf("invalid secret name %q", k)
		}
		env = append(env, k+"="+c.Secrets[k])
	}
	mounts := []oci.Mount{
		{Source: filepath.Dir(o.cfg.StateSocket), Destination: ociStateDir, ReadOnly: true},
		{Source: filepath.Dir(o.cfg.CloudSocket), Destination: ociCloudDir, ReadOnly: true},
	}
	if c.Files != nil {
		// The secret DIRECTORY, read-only, owned by the container's uid while it runs: a
		// token the refresher renames into it shows at once (a file mount would not).
		mounts = append(mounts, oci.Mount{Source: c.Files.Dir(), Destination: ociSecrets, ReadOnly: true})
		env = append(env, c.Files.Env()...)
		giveBack, lerr := c.Files.Lend(int(uid), int(uid))
		if lerr != nil {
			return 0, "", lerr
		}
		defer func() {
			if gerr := giveBack(); gerr != nil && err == nil {
				err = fmt.Errorf("giving the job's secret directory back: %w", gerr)
			}
		}()
	}
	if c.PluginCache != "" {
		mounts = append(mounts, oci.Mount{Source: c.PluginCache, Destination: ociPlugins, ReadOnly: true})
		env = append(env, "TF_PLUGIN_CACHE_DIR="+ociPlugins)
	}
	args := append([]string{ociFwd,
		"-listen", "127.0.0.1:" + strconv.Itoa(o.cfg.StatePort),
		"-unix", ociStateDir + "/" + filepath.Base(o.cfg.StateSocket),
		"--", ociTofu}, c.Args...)
	res, err := o.exec.Run(ctx, oci.Spec{
		ID:      id,
		Rootfs:  o.rootfs,
		Args:    args,
		Env:     dedupEnv(env),
		Workdir: workdir,
		Mounts:  mounts,
		UID:     uid,
		GID:     uid,
		Limits:  o.cfg.Limits,
		Network: oci.NetworkIsolated,
		Timeout: o.cfg.Timeout,
		// An apply is interrupted first and killed after the grace; the rest at once.
		Interrupt: c.Graceful,
		Stdout:    c.Stdout,
		Stderr:    c.Stderr,
	})
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			// Like the process executor: the job's context ended (cancelled, or the
			// phase's time limit). err also carries any cleanup failure.
			return res.ExitCode, "the job was cancelled or exceeded its time limit: " + err.Error(), nil
		}
		return res.ExitCode, "", err
	}
	if res.OOMKilled || res.PidsLimited || res.TimedOut {
		return res.ExitCode, res.Explain(), nil
	}
	return res.ExitCode, "", nil
}
