package oci

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Host files of a job: the FIFOs secrets travel through, and ownership.

// writeFIFO opens the FIFO for writing (blocking until runc opens it for reading),
// writes data and removes the FIFO.
func writeFIFO(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(path); err == nil {
		err = rerr
	}
	return err
}

// unblockFIFO releases a writeFIFO that waits for a reader that will never come: opening
// the read side (and closing it) lets the writer's open return; its write then fails.
func unblockFIFO(path string, done <-chan error) {
	for {
		if f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func ownerOf(fi fs.FileInfo) (int, int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return 0, 0
}

// chownTree changes the owner of dir and everything below it, never following symlinks.
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
