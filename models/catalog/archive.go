package catalog

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
)

// Bounds on a module archive: a module is source code, and its files go into every
// config bundle that calls it (a bundle holds at most 32 MiB, models/bundle).
const (
	// MaxArchiveBytes bounds an archive as fetched (models/modules stops reading there).
	MaxArchiveBytes = 8 << 20
	// maxArchiveFiles bounds the regular files of an archive.
	maxArchiveFiles = 1000
	// maxUnpackedBytes bounds the files of an archive once unpacked, all together.
	maxUnpackedBytes = 16 << 20
)

// unpack reads a module archive into its regular files, keyed by their clean path
// relative to the archive's root. Gantry reads zip archives and gzip-compressed tar
// archives, told apart by their first bytes as OpenTofu does (it also reads xz and
// bzip2 tars, which Gantry refuses, saying so). An archive is refused whole when an
// entry has an absolute path, a "..", a backslash, is a link (symbolic or hard), a
// device or a FIFO, is named twice, or when it is over the bounds above: a module
// must never write outside its directory nor point at the portal's own files.
func unpack(data []byte) (map[string][]byte, error) {
	if len(data) > MaxArchiveBytes {
		return nil, fmt.Errorf("the archive is %d bytes, more than %d", len(data), MaxArchiveBytes)
	}
	switch {
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		return untar(data)
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")):
		return unzip(data)
	}
	return nil, errors.New("the archive is neither a zip nor a gzip-compressed tar archive (Gantry reads only these two)")
}

// unpacked collects an archive's files within the bounds.
type unpacked struct {
	files map[string][]byte
	total int64
}

// add reads one regular file of at most size bytes (as its header says; a header
// that lies is caught by the limited read).
func (u *unpacked) add(name string, size int64, r io.Reader) error {
	clean, err := entryPath(name)
	if err != nil {
		return err
	}
	if clean == "." {
		return fmt.Errorf("the archive entry %q is a file without a name", name)
	}
	if _, dup := u.files[clean]; dup {
		return fmt.Errorf("the archive holds %s twice", clean)
	}
	if len(u.files) >= maxArchiveFiles {
		return fmt.Errorf("the archive holds more than %d files", maxArchiveFiles)
	}
	left := maxUnpackedBytes - u.total
	if size > left {
		return fmt.Errorf("the archive unpacks to more than %d bytes", maxUnpackedBytes)
	}
	body, err := io.ReadAll(io.LimitReader(r, left+1))
	if err != nil {
		return fmt.Errorf("reading %s from the archive: %w", clean, err)
	}
	if int64(len(body)) > left {
		return fmt.Errorf("the archive unpacks to more than %d bytes", maxUnpackedBytes)
	}
	u.total += int64(len(body))
	u.files[clean] = body
	return nil
}

func untar(data []byte) (map[string][]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("reading the gzip stream: %w", err)
	}
	u := unpacked{files: map[string][]byte{}}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return u.files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the tar archive: %w", err)
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			if err := u.add(hdr.Name, hdr.Size, tr); err != nil {
				return nil, err
			}
		case tar.TypeDir:
			if _, err := entryPath(hdr.Name); err != nil {
				return nil, err
			}
		case tar.TypeXGlobalHeader:
			// A pax global header (git archive writes one with the commit id) names
			// no file.
		default:
			return nil, fmt.Errorf("the archive entry %q is a %s: only regular files and directories are accepted", hdr.Name, tarKind(hdr.Typeflag))
		}
	}
}

func unzip(data []byte) (map[string][]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("reading the zip archive: %w", err)
	}
	u := unpacked{files: map[string][]byte{}}
	for _, f := range zr.File {
		mode := f.Mode()
		switch {
		case mode.IsDir():
			if _, err := entryPath(f.Name); err != nil {
				return nil, err
			}
			continue
		case !mode.IsRegular():
			return nil, fmt.Errorf("the archive entry %q is a %s: only regular files and directories are accepted", f.Name, zipKind(mode))
		case f.UncompressedSize64 > maxUnpackedBytes:
			return nil, fmt.Errorf("the archive unpacks to more than %d bytes", maxUnpackedBytes)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("reading %s from the archive: %w", f.Name, err)
		}
		err = u.add(f.Name, int64(f.UncompressedSize64), rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
	}
	return u.files, nil
}

// entryPath is an entry's name as a clean relative path ("./a/b/" is "a/b"), or why
// it is refused.
func entryPath(name string) (string, error) {
	trimmed := strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/")
	switch {
	case strings.Contains(name, `\`):
		return "", fmt.Errorf("the archive entry %q has a backslash", name)
	case strings.HasPrefix(name, "/"):
		return "", fmt.Errorf("the archive entry %q is an absolute path", name)
	case trimmed == "" || trimmed == ".":
		return ".", nil // the root directory itself
	}
	for _, part := range strings.Split(trimmed, "/") {
		if part == ".." {
			return "", fmt.Errorf("the archive entry %q leaves the archive (..)", name)
		}
	}
	if path.Clean(trimmed) != trimmed {
		return "", fmt.Errorf("the archive entry %q is not a clean path", name)
	}
	return trimmed, nil
}

// zipKind names what a zip entry that is not a regular file is, in words.
func zipKind(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeSymlink != 0:
		return "symbolic link"
	case mode&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		return "device"
	case mode&fs.ModeNamedPipe != 0:
		return "FIFO"
	}
	return fmt.Sprintf("file of mode %s", mode)
}

// tarKind names a tar entry type in words.
func tarKind(flag byte) string {
	switch flag {
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "FIFO"
	}
	return fmt.Sprintf("entry of type %q", flag)
}
