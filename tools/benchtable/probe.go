package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gantry/bench"
)

// procProbe reads Linux's /proc: the load average and the CPU time of root and every
// process below it. A child's CPU time stays counted once it ends: its parent's
// cutime and cstime take it over when the parent waits for it.
type procProbe struct{ root int }

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux
// architecture Go supports.
const clockTick = time.Second / 100

func (procProbe) Now() time.Time { return time.Now() }

func (procProbe) Load() float64 { return bench.LoadAverage() }

func (p procProbe) CPU() time.Duration {
	stats := map[int]procStat{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue // it ended meanwhile
		}
		if s, ok := parseStat(string(b)); ok {
			stats[pid] = s
		}
	}
	return treeCPU(stats, p.root)
}

// procStat is what CPU accounting needs of /proc/<pid>/stat.
type procStat struct {
	ppid int
	// ticks is utime + stime + cutime + cstime: the process and its waited-for children.
	ticks int64
}

// parseStat reads a /proc/<pid>/stat line. The command name is in parentheses and may
// hold spaces and parentheses itself, so the fields are counted from the last ')'.
func parseStat(line string) (procStat, bool) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(line[i+1:])
	// After the name: state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17).
	if len(f) < 15 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, false
	}
	var ticks int64
	for _, s := range f[11:15] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return procStat{}, false
		}
		ticks += v
	}
	return procStat{ppid: ppid, ticks: ticks}, true
}

// treeCPU is the CPU time of root and all its descendants in stats.
func treeCPU(stats map[int]procStat, root int) time.Duration {
	children := map[int][]int{}
	for pid, s := range stats {
		children[s.ppid] = append(children[s.ppid], pid)
	}
	var ticks int64
	seen := map[int]bool{}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if s, ok := stats[pid]; ok {
			ticks += s.ticks
		}
		queue = append(queue, children[pid]...)
	}
	return time.Duration(ticks) * clockTick
}
