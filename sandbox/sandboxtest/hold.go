package sandboxtest

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// HoldCreate wraps a sandbox cloud's handler: the first create (POST) whose path names
// kind is held, before the cloud sees it, until release is closed; reached is closed
// when it arrives. A test stops an apply halfway with it: the resources before it are
// created, the held one is judged by the cloud only once released.
func HoldCreate(kind string) (wrap func(http.Handler) http.Handler, reached <-chan struct{}, release chan struct{}) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.Contains(r.URL.Path, kind) {
				held := false
				once.Do(func() { held = true; close(arrived) })
				if held {
					<-release // the cloud under test is slow to take it, not a wait
				}
			}
			next.ServeHTTP(w, r)
		})
	}, arrived, release
}

// ObjectIDs are the ids of every object a sandbox cloud holds in dataDir, sorted.
func ObjectIDs(t testing.TB, dataDir string) []string {
	t.Helper()
	var ids []string
	require.NoError(t, filepath.WalkDir(filepath.Join(dataDir, "objects"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			ids = append(ids, strings.TrimSuffix(filepath.Base(path), ".json"))
		}
		return err
	}))
	slices.Sort(ids)
	return ids
}
