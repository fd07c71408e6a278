package seaweed

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Region is the region a client names (SeaweedFS accepts any; the AWS SDK needs one).
const Region = "us-east-1"

// Options configure a private SeaweedFS.
type Options struct {
	Binary string // the weed binary (EnsureBinary); required
	// Dir holds the server's data, configuration and logs; empty: a new temporary directory,
	// removed by Stop.
	Dir string
	// Log receives the server's output (it never sees a token, the tests check); nil: discarded.
	Log io.Writer
	// Providers are the OpenID Connect issuers to trust, Roles what their tokens may assume.
	Providers []Provider
	Roles     []Role
	// SigningKey signs the STS session tokens (32 bytes or more); nil: a random one. Set
	// explicitly either way: without it SeaweedFS would sign with a key of its filer's.
	SigningKey []byte
	// StartTimeout bounds the wait for the S3 and STS endpoints; zero: a minute.
	StartTimeout time.Duration
	// IP is the address every service listens on and advertises; empty: 127.0.0.1. (A phase in
	// a network namespace of its own reaches the host's loopback only through a forwarder.)
	IP string
}

// Server is a running private SeaweedFS.
type Server struct {
	// URL is the S3 endpoint and the STS endpoint alike (AWS_ENDPOINT_URL_S3 and
	// AWS_ENDPOINT_URL_STS): http://127.0.0.1:<port>. Clients address buckets path-style.
	URL string
	// RoleARNs maps each role's name to its ARN (AWS_ROLE_ARN).
	RoleARNs map[string]string
	// IAMConfig is the -s3.iam.config file Start wrote (0600: it holds the signing key).
	IAMConfig string
	Dir       string // the server's directory
	PID       int

	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has been waited for
	waitErr  error
	ownDir   bool
	sockets  []string // the gRPC sockets weed makes in /tmp whatever its options
	stopOnce sync.Once
	stopErr  error
}

// ports are the listening ports of one server: master, volume, filer and S3, each with its gRPC port.
type ports struct{ master, masterGRPC, volume, volumeGRPC, filer, filerGRPC, s3, s3GRPC int }

// freePorts picks n ports free on ip now. They are held until all are
// picked, so they differ from each other; another process may still take one before the
// server binds it, and then Start fails with the server's message.
func freePorts(ip string, n int) ([]int, error) {
	var out []int
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// Start runs `weed server` (master, volume, filer and S3 gateway with STS in one process) on
// free ports of the loopback interface (or Options.IP) with an IAM configuration generated from
// opts, and returns once its S3 endpoint answers and its STS service refuses a malformed token.
// Nothing but the roles' sessions can do anything: there is no static identity. Stop it with
// Stop (a test: t.Cleanup); it is also killed when the thread that started it ends (Pdeathsig),
// so start it from an ordinary goroutine, not one locked to its thread.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Binary == "" {
		return nil, errors.New("no SeaweedFS binary (seaweed.EnsureBinary)")
	}
	ip := cmp.Or(opts.IP, "127.0.0.1")
	if net.ParseIP(ip) == nil {
		return nil, fmt.Errorf("%q is no IP address", ip)
	}
	s := &Server{Dir: opts.Dir, RoleARNs: map[string]string{}, exited: make(chan struct{})}
	if s.Dir == "" {
		dir, err := os.MkdirTemp("", "gantry-seaweedfs-")
		if err != nil {
			return nil, err
		}
		s.Dir, s.ownDir = dir, true
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Stop()
		}
	}()
	if err := s.launch(opts, ip); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, cmp.Or(opts.StartTimeout, time.Minute), opts.Roles); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// launch writes the configuration, picks the ports and starts the process.
func (s *Server) launch(opts Options, ip string) error {
	key := opts.SigningKey
	if key == nil {
		key = make([]byte, 32)
		rand.Read(key)
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, "data"), 0o700); err != nil {
		return err
	}
	config, err := s.writeConfig(opts.Providers, opts.Roles, key)
	if err != nil {
		return err
	}
	s.IAMConfig = config
	for _, r := range opts.Roles {
		s.RoleARNs[r.Name] = RoleARN(r.Name)
	}
	p, err := freePorts(ip, 8)
	if err != nil {
		return err
	}
	pt := ports{p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]}
	for name, port := range map[string]int{"master": pt.masterGRPC, "volume": pt.volumeGRPC, "filer": pt.filerGRPC, "s3": pt.s3GRPC} {
		s.sockets = append(s.sockets, fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%d.sock", name, port))
	}
	s.URL = "http://" + net.JoinHostPort(ip, strconv.Itoa(pt.s3))
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	s.cmd = exec.Command(opts.Binary, s.args(ip, pt, config)...)
	s.cmd.Dir = s.Dir
	// Its own HOME and TMPDIR: no security.toml of the user's, no log files in /tmp.
	s.cmd.Env = []string{"HOME=" + s.Dir, "TMPDIR=" + s.Dir, "PATH=" + os.Getenv("PATH")}
	s.cmd.Stdout, s.cmd.Stderr = log, log
	// Killed with the process that started it, should that one die without Stop.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting SeaweedFS: %w", err)
	}
	s.PID = s.cmd.Process.Pid
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	return nil
}

// args are weed's arguments: every port chosen, every extra service off, everything in Dir.
func (s *Server) args(ip string, pt ports, config string) []string {
	data := filepath.Join(s.Dir, "data")
	n := strconv.Itoa
	return []string{"-logtostderr", "-logdir=" + s.Dir, "server",
		"-dir=" + data, "-ip=" + ip, "-ip.bind=" + ip,
		"-master.port=" + n(pt.master), "-master.port.grpc=" + n(pt.masterGRPC),
		"-master.volumeSizeLimitMB=64", "-master.raftHashicorp=false",
		"-volume.port=" + n(pt.volume), "-volume.port.grpc=" + n(pt.volumeGRPC), "-volume.max=16",
		// weed's default keeps 1% of the disk free and turns every volume read-only below it (a
		// put then fails with InternalError): a nearly full shared disk is not a full one.
		"-volume.minFreeSpace=256MiB", "-volume.preStopSeconds=0",
		"-filer", "-filer.port=" + n(pt.filer), "-filer.port.grpc=" + n(pt.filerGRPC),
		"-filer.localSocket=" + filepath.Join(s.Dir, "filer.sock"),
		"-s3", "-s3.port=" + n(pt.s3), "-s3.port.grpc=" + n(pt.s3GRPC), "-s3.port.iceberg=0", "-s3.port.lance=0",
		"-s3.localSocket=" + filepath.Join(s.Dir, "s3.sock"),
		"-s3.iam.config=" + config,
		"-master.telemetry=false", "-webdav=false", "-sftp=false", "-iam=false", "-mq.broker=false", "-mq.agent=false",
	}
}

// writeConfig writes the providers' CAs and the IAM configuration into Dir (0600).
func (s *Server) writeConfig(providers []Provider, roles []Role, key []byte) (string, error) {
	caFiles := map[string]string{}
	for _, p := range providers {
		if len(p.CAPEM) == 0 {
			continue
		}
		f := filepath.Join(s.Dir, "ca-"+p.Name+".pem")
		if !nameRe.MatchString(p.Name) {
			return "", fmt.Errorf("provider name %q is invalid", p.Name)
		}
		if err := os.WriteFile(f, p.CAPEM, 0o600); err != nil {
			return "", err
		}
		caFiles[p.Name] = f
	}
	data, err := iamConfig(providers, roles, key, caFiles)
	if err != nil {
		return "", err
	}
	f := filepath.Join(s.Dir, "iam.json")
	return f, os.WriteFile(f, data, 0o600)
}

// waitReady polls, until timeout, for the S3 endpoint (an anonymous request is refused with
// S3's AccessDenied) and the STS service (a malformed token is refused as an invalid
// request, not as a missing service: any STS ErrorResponse); the server exiting ends the wait at once.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration, roles []Role) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	role := "arn:aws:iam::role/none"
	if len(roles) > 0 {
		role = RoleARN(roles[0].Name)
	}
	var last string
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ready, state := s.probe(ctx, role)
		if ready {
			return nil
		}
		last = state
		select {
		case <-s.exited:
			return fmt.Errorf("SeaweedFS exited before it was ready (%v); last: %s", s.waitErr, last)
		case <-ctx.Done():
			return fmt.Errorf("SeaweedFS was not ready within %s: %s", timeout, last)
		case <-tick.C:
		}
	}
}

// probe reports whether both endpoints answer as a ready server does, and what it saw.
func (s *Server) probe(ctx context.Context, role string) (bool, string) {
	status, body, err := s.request(ctx, http.MethodGet, s.URL+"/", "")
	if err != nil {
		return false, err.Error()
	}
	if status != http.StatusForbidden || !strings.Contains(body, "AccessDenied") {
		return false, fmt.Sprintf("S3: %d %s", status, body)
	}
	form := url.Values{"Action": {"AssumeRoleWithWebIdentity"}, "Version": {"2011-06-15"}, "RoleArn": {role},
		"RoleSessionName": {"readiness"}, "WebIdentityToken": {"not-a-token"}}
	status, body, err = s.request(ctx, http.MethodPost, s.URL+"/", form.Encode())
	if err != nil {
		return false, err.Error()
	}
	if status/100 != 4 || !strings.Contains(body, "<ErrorResponse") {
		return false, fmt.Sprintf("STS: %d %s", status, body)
	}
	return true, ""
}

func (s *Server) request(ctx context.Context, method, u, form string) (int, string, error) {
	// A listening server may not answer yet: each try gets a moment, the wait its deadline.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(form))
	if err != nil {
		return 0, "", err
	}
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, string(bytes.TrimSpace(b)), nil
}

// StopGrace is how long Stop waits after SIGTERM before it kills the server.
const StopGrace = 5 * time.Second

// Stop ends the server (SIGTERM, SIGKILL after StopGrace), removes the gRPC sockets weed
// made in /tmp and, when Start made the directory, the directory. It returns the first
// failure; calling it again returns the same.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		if s.cmd != nil && s.cmd.Process != nil {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.exited:
			case <-time.After(StopGrace):
				_ = syscall.Kill(-s.PID, syscall.SIGKILL) // its process group (Setpgid)
				<-s.exited
			}
		}
		for _, sock := range s.sockets {
			if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.stopErr = errors.Join(s.stopErr, err)
			}
		}
		if s.ownDir {
			s.stopErr = errors.Join(s.stopErr, os.RemoveAll(s.Dir))
		}
	})
	return s.stopErr
}
