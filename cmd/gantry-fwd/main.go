// Command gantry-fwd is the PID-1 helper of Gantry's runc containers (installed in the
// rootfs as /bin/fwd, built with CGO_ENABLED=0 go build -trimpath -ldflags "-s -w").
//
//	fwd [-listen 127.0.0.1:8765 -unix /run/state/state.sock] [-secret-env NAME=/run/secrets/file ...] -- /bin/tofu args...
//
// It listens on TCP inside the container's (isolated) network namespace and forwards
// every connection to the unix socket (bind-mounted read-only from the host), exports
// each secret file's content (one trailing newline removed) into the child's environment
// as NAME, runs the command, forwards signals to it, reaps orphans (as PID 1), and exits
// with the child's exit code, 128+signal if a signal killed it. Its own failures exit
// 125 (setup), 126 (command cannot be run) or 127 (command not found).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fl := flag.NewFlagSet("fwd", flag.ContinueOnError)
	listen := fl.String("listen", "", "TCP address to listen on (e.g. 127.0.0.1:8765)")
	unixPath := fl.String("unix", "", "unix socket to forward the TCP connections to")
	var secrets []string
	fl.Func("secret-env", "NAME=/path: export the file's content as NAME (repeatable)", func(v string) error {
		name, path, ok := strings.Cut(v, "=")
		if !ok || name == "" || path == "" || strings.ContainsAny(name, "= \x00") {
			return errors.New("want NAME=/path")
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		val := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		secrets = append(secrets, name+"="+val)
		return nil
	})
	if err := fl.Parse(args); err != nil {
		return 125
	}
	argv := fl.Args()
	if len(argv) == 0 || (*listen == "") != (*unixPath == "") {
		fmt.Fprintln(os.Stderr, "fwd: usage: fwd [-listen ADDR -unix PATH] [-secret-env NAME=FILE ...] -- cmd args...")
		return 125
	}
	if *listen != "" {
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fwd:", err)
			return 125
		}
		go serve(ln, *unixPath)
	}

	// Subscribe before starting the child, so that no SIGCHLD or forwarded signal is lost.
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = mergeEnv(os.Environ(), secrets)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "fwd:", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	child := cmd.Process.Pid
	for sig := range sigs {
		switch sig {
		case syscall.SIGCHLD:
			// Reap every exited process: the child and any orphan reparented to us.
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if err != nil || pid <= 0 {
					break
				}
				if pid == child {
					if ws.Signaled() {
						return 128 + int(ws.Signal())
					}
					return ws.ExitStatus()
				}
			}
		case syscall.SIGURG, syscall.SIGPIPE, syscall.SIGWINCH:
			// SIGURG is the Go runtime's preemption signal; the others are ours.
		default:
			_ = syscall.Kill(child, sig.(syscall.Signal))
		}
	}
	return 125 // not reached
}

// mergeEnv returns env with the secrets added, replacing variables of the same name.
func mergeEnv(env, secrets []string) []string {
	out := make([]string, 0, len(env)+len(secrets))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		shadowed := false
		for _, s := range secrets {
			if strings.HasPrefix(s, name+"=") {
				shadowed = true
			}
		}
		if !shadowed {
			out = append(out, kv)
		}
	}
	return append(out, secrets...)
}

func serve(ln net.Listener, unixPath string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "fwd: accept:", err)
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("unix", unixPath)
			if err != nil {
				fmt.Fprintln(os.Stderr, "fwd:", err)
				return
			}
			defer u.Close()
			done := make(chan struct{})
			go func() { pipe(u, c); close(done) }()
			pipe(c, u)
			<-done
		}()
	}
}

// pipe copies src to dst, then half-closes dst's write side so the peer sees EOF.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
}
