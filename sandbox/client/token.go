package client

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// TokenSource returns the bearer token for the next request. A source may answer with
// another token each time (a workload token its runner refreshed); it must be safe for
// concurrent use, and its errors must never contain the token.
type TokenSource func() (string, error)

// StaticToken is the source of one fixed token.
func StaticToken(token string) TokenSource {
	return func() (string, error) { return token, nil }
}

// MaxTokenFile bounds a token file: it holds one token.
const MaxTokenFile = 64 << 10

// A token file that cannot hold a token.
var (
	ErrTokenFileEmpty    = errors.New("the token file is empty")
	ErrTokenFileTooLarge = errors.New("the token file is larger than 64 KiB; it should hold one token")
)

// ReadTokenFile reads the token in the file at path (surrounding white space dropped).
// An empty file wraps ErrTokenFileEmpty, one over MaxTokenFile ErrTokenFileTooLarge.
func ReadTokenFile(path string) (string, error) {
	tok, _, err := readTokenFile(path)
	return tok, err
}

// readTokenFile reads the token and returns the file it read it from, as it was opened
// (a rename that replaces the file afterwards is a different file).
func readTokenFile(path string) (string, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	body, err := io.ReadAll(io.LimitReader(f, MaxTokenFile+1))
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(body) > MaxTokenFile {
		return "", nil, fmt.Errorf("%s: %w", path, ErrTokenFileTooLarge)
	}
	tok := strings.TrimSpace(string(body))
	if tok == "" {
		return "", nil, fmt.Errorf("%s: %w", path, ErrTokenFileEmpty)
	}
	return tok, info, nil
}

// TokenFile is the source of the token in the file at path, for a runner that refreshes
// a short-lived token while a long job runs: the file is read again whenever it changed
// since the last read (another file, size or modification time), so a rewritten token is
// used from the next request on, for the price of one stat per request. Writers should
// replace the file by a rename (write a temporary file, then rename it over the token
// file): a reader never sees half a token, and every replacement is a new file.
func TokenFile(path string) TokenSource {
	f := &fileToken{path: path}
	return f.current
}

type fileToken struct {
	path string

	mu    sync.Mutex
	read  os.FileInfo // the file the token was read from; nil before the first read
	token string
}

func (f *fileToken) current() (string, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("reading the sandbox token: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.read != nil && os.SameFile(f.read, st) && st.Size() == f.read.Size() && st.ModTime().Equal(f.read.ModTime()) {
		return f.token, nil
	}
	tok, info, err := readTokenFile(f.path)
	if err != nil {
		return "", fmt.Errorf("reading the sandbox token: %w", err)
	}
	f.read, f.token = info, tok
	return tok, nil
}
