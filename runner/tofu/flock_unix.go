//go:build unix

package tofu

import (
	"os"
	"syscall"
)

// FileLock takes an exclusive advisory lock on name (creating it), blocking until it is free.
// The kernel drops the lock if the process dies, so a killed build never wedges the next one.
func FileLock(name string) (unlock func(), err error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
