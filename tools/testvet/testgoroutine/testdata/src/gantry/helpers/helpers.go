// Package helpers stands in for gantry/web/webtest: test helpers, outside any
// _test.go file, whose facts reach the tests of another package.
package helpers

import (
	"testing"

	"github.com/stretchr/testify/require"
)

type App struct{}

// ReadBody ends the test through require.
func ReadBody(t testing.TB, body string) string { // want ReadBody:`failsTest\(require\)`
	require.NoError(t, nil)
	return body
}

// PostForm ends the test through ReadBody, a helper of its own package.
func (a *App) PostForm(t testing.TB, path string) string { // want PostForm:`failsTest\(helpers\.ReadBody\)`
	return ReadBody(t, path)
}

// MustStart ends the test through t.Fatalf.
func MustStart(t testing.TB) { // want MustStart:`failsTest\(t\.Fatalf\)`
	if t == nil {
		t.Fatalf("no test")
	}
}

// Must is generic: the fact is on its declaration, found from any instance.
func Must[T any](t testing.TB, v T, err error) T { // want Must:`failsTest\(require\)`
	require.NoError(t, err)
	return v
}

// Logs only logs: no fact.
func Logs(t testing.TB) { t.Logf("logs") }

// Background's require call is reported here, but it does not end its caller's
// goroutine: no fact.
func Background(t testing.TB) {
	go func() {
		require.NoError(t, nil) // want `require\.NoError fails the test off the test's goroutine \(inside a go statement\): keep the error and check it after the goroutine ends`
	}()
}

// Subtests ends only its subtests, each on its own test goroutine: no fact.
func Subtests(t *testing.T) {
	t.Run("sub", func(t *testing.T) { require.NoError(t, nil) })
}

// Collect takes testify's TestingT so that it serves an *assert.CollectT too; types
// declared in testify are no testing values: no fact.
func Collect(t require.TestingT) { require.NoError(t, nil) }
