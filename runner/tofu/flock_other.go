//go:build !unix

package tofu

import "errors"

// FileLock is unavailable here: tofu runs on Linux (and macOS for development).
func FileLock(string) (func(), error) {
	return nil, errors.New("file locking is not supported on this platform")
}
