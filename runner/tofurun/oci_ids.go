package tofurun

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"

	"gantry/runner/oci"
)

// jobID returns a fresh container id.
func jobID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "tofu-" + hex.EncodeToString(b[:]), nil
}

// dedupEnv keeps the last value of each variable, like os/exec (runc passes
// duplicates on, and programs disagree about which one wins).
func dedupEnv(env []string) []string {
	last := map[string]int{}
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = i
	}
	out := make([]string, 0, len(last))
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if last[k] == i {
			out = append(out, kv)
		}
	}
	return out
}

// unusedJobID returns an id for the job's uid and gid (oci.UnusedID) that is also
// outside every subordinate id range of /etc/subuid and /etc/subgid: a user owning
// such a range can become that uid in a user namespace and read the job's
// /proc/<pid>/environ (its credentials).
func unusedJobID() (uint32, error) {
	ranges := append(subordinateRanges("/etc/subuid"), subordinateRanges("/etc/subgid")...)
	min := uint64(ociMinID)
	for range 1000 {
		id, err := oci.UnusedID(uint32(min))
		if err != nil {
			return 0, err
		}
		clear := true
		for _, r := range ranges {
			if uint64(id) >= r[0] && uint64(id) < r[1] {
				min, clear = r[1], false
			}
		}
		if clear {
			return id, nil
		}
		if min >= 1<<32-1 {
			break
		}
	}
	return 0, errors.New("no job uid outside the subordinate id ranges")
}

// subordinateRanges reads [start, end) ranges from a subuid/subgid file (absent: none).
func subordinateRanges(path string) [][2]uint64 {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][2]uint64
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		p := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(p) != 3 {
			continue
		}
		start, err1 := strconv.ParseUint(p[1], 10, 32)
		n, err2 := strconv.ParseUint(p[2], 10, 32)
		if err1 == nil && err2 == nil && n > 0 {
			out = append(out, [2]uint64{start, start + n})
		}
	}
	return out
}
