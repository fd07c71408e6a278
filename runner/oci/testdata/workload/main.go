// Command workload is the test workload of runner/oci: built static (CGO_ENABLED=0) by
// the tests and copied into the test rootfs as /bin/workload.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: workload MODE ...")
		os.Exit(64)
	}
	switch os.Args[1] {
	case "true":
	case "hello":
		hello()
	case "isolation":
		isolation(os.Args[2], os.Args[3])
	case "oom":
		oom()
	case "pids":
		pids()
	case "sleep":
		d, _ := time.ParseDuration(os.Args[2])
		time.Sleep(d)
	case "killself":
		fmt.Println("killing myself with SIGTERM")
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(5 * time.Second)
		os.Exit(99)
	case "orphans":
		// Leave orphans behind for PID 1 (fwd) to reap: sh forks sleeps and exits.
		_ = exec.Command("/proc/self/exe", "sleep", "50ms").Start()
		_ = exec.Command("/proc/self/exe", "sleep", "50ms").Start()
		time.Sleep(300 * time.Millisecond)
		out, _ := os.ReadFile("/proc/1/status")
		fmt.Println(strings.Contains(string(out), "State:\tS"))
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(64)
	}
}

func hello() {
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"args": os.Args[2:], "env": os.Environ()})
	fmt.Fprintln(os.Stderr, "to stderr")
	if d, err := time.ParseDuration(os.Getenv("SLEEP")); err == nil {
		time.Sleep(d)
	}
	// WAIT_FOR: run until the test creates this file (the test holds the container running
	// while it looks at it, whatever the machine's pace); two minutes bound a test that
	// never does, so no container outlives it.
	if name := os.Getenv("WAIT_FOR"); name != "" {
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(name); err == nil {
				break
			}
		}
	}
	code, _ := strconv.Atoi(os.Getenv("EXIT"))
	os.Exit(code)
}

func errStr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func isolation(hostTCP, fwdAddr string) {
	r := map[string]any{"uid": os.Getuid(), "gid": os.Getgid(), "euid": os.Geteuid()}
	status := func(path string) map[string]string {
		m := map[string]string{}
		data, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				m[k] = strings.TrimSpace(v)
			}
		}
		return m
	}
	self, init := status("/proc/self/status"), status("/proc/1/status")
	r["capEff"], r["capPrm"], r["capBnd"], r["noNewPrivs"] = self["CapEff"], self["CapPrm"], self["CapBnd"], self["NoNewPrivs"]
	r["initCapEff"], r["initName"] = init["CapEff"], init["Name"]
	if u, err := user.Current(); err == nil {
		r["user"] = u.Username
	} else {
		r["user"] = "error: " + err.Error()
	}
	r["hostname"], _ = os.Hostname()
	r["writeRoot"] = errStr(os.WriteFile("/rootfile", []byte("x"), 0o644))
	r["writeBin"] = errStr(os.WriteFile("/bin/x", []byte("x"), 0o644))
	r["writeWorkspace"] = errStr(os.WriteFile("/workspace/out.txt", []byte("from the container"), 0o644))
	r["writeTmp"] = errStr(os.WriteFile("/tmp/t", []byte("x"), 0o644))
	r["writeState"] = errStr(os.WriteFile("/run/state/x", []byte("x"), 0o644))
	wd, _ := os.Getwd()
	r["cwd"] = wd
	var ifnames []string
	ifs, err := net.Interfaces()
	for _, i := range ifs {
		ifnames = append(ifnames, i.Name)
	}
	r["interfaces"], r["interfacesErr"] = ifnames, errStr(err)
	c, err := net.DialTimeout("tcp", hostTCP, 2*time.Second)
	if c != nil {
		c.Close()
	}
	r["hostTCP"] = errStr(err)
	if c, err := net.DialTimeout("tcp", "10.255.255.1:80", time.Second); err == nil {
		c.Close()
		r["outside"] = ""
	} else {
		r["outside"] = err.Error()
	}
	r["fwd"] = func() string {
		c, err := net.DialTimeout("tcp", fwdAddr, 2*time.Second)
		if err != nil {
			return "error: " + err.Error()
		}
		defer c.Close()
		fmt.Fprint(c, "ping")
		c.(*net.TCPConn).CloseWrite()
		b, err := io.ReadAll(c)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(b)
	}()
	r["token"] = os.Getenv("TOKEN")
	r["env"] = os.Environ()
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

func oom() {
	const size = 200 << 20
	b := make([]byte, size)
	for i := 0; i < size; i += 4096 {
		b[i] = 1
	}
	fmt.Println("allocated", len(b), "bytes without being killed")
}

func pids() {
	n := 0
	for {
		cmd := exec.Command("/proc/self/exe", "sleep", "10s")
		if err := cmd.Start(); err != nil {
			fmt.Printf("started %d children, then: %v\n", n, err)
			os.Exit(1)
		}
		n++
		if n > 1000 {
			fmt.Println("no pids limit")
			os.Exit(0)
		}
	}
}
