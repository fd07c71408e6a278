package webtest

import (
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	catalogfiles "gantry/catalog"
)

// CatalogWith is the shipped catalog as a file system, with extra files (path -> body)
// added or replaced: test templates next to the real ones.
func CatalogWith(t testing.TB, extra map[string]string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	require.NoError(t, fs.WalkDir(catalogfiles.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(catalogfiles.FS, path)
		m[path] = &fstest.MapFile{Data: data}
		return err
	}))
	for path, body := range extra {
		m[path] = &fstest.MapFile{Data: []byte(body)}
	}
	return m
}
