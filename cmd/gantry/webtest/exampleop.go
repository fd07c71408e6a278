package webtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/runner/tofu"
)

// exampleOPModule is the module holding the zitadel/oidc example OpenID Provider: an
// OpenID Provider Gantry did not write, which serves profile claims only from its UserInfo
// endpoint (its clients do not assert them in the ID token). Gantry's go.mod already
// requires the module, so the module proxy serves the exact version pinned there.
const exampleOPModule = "github.com/zitadel/oidc/v3"

// EnsureExampleOP returns the path of the zitadel/oidc example server of the version
// go.mod pins, building it first into the user cache (<cache>/gantry/exampleop/<version>-
// <hash>), like the other pinned builds: a later run, or a fresh clone, finds it there.
func EnsureExampleOP(ctx context.Context, repoRoot string, log io.Writer) (string, error) {
	version, err := tofu.ModuleVersion(filepath.Join(repoRoot, "go.mod"), exampleOPModule)
	if err != nil {
		return "", err
	}
	dir, err := tofu.PinnedCacheDir(repoRoot, nil, exampleOPModule+"@"+version, version, "exampleop")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "server")
	// The example prints no version: the directory names it, and the binary is there only
	// once a build finished (EnsurePinned renames it into place).
	present := func(_ context.Context, p string) string {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return version
		}
		return ""
	}
	return tofu.EnsurePinned(ctx, tofu.PinnedBuild{Path: path, Want: version, Version: present,
		Build: func(out string) tofu.GoBuild {
			return tofu.GoBuild{Label: "zitadel/oidc example OpenID Provider", Dir: repoRoot,
				Package: exampleOPModule + "/example/server", Flags: []string{"-mod=readonly", "-p", "1", "-trimpath", "-o", out}}
		},
		Note: "the zitadel/oidc " + version + " example OpenID Provider, into " + dir}, log)
}

// ExampleOPUser is one user of the example provider's users file.
type ExampleOPUser struct {
	ID, Username, Password, FirstName, LastName, Email string
	EmailVerified                                      bool
	PreferredLanguage                                  string
}

// ExampleOP is a running example provider.
type ExampleOP struct {
	Issuer string // http://localhost:<port>/, as the example names itself
	Client Provider
}

// StartExampleOP runs the example provider at path on a free port with users, its client
// "web" redirecting to redirectURL, until t ends.
func StartExampleOP(t testing.TB, path, redirectURL string, users []ExampleOPUser) ExampleOP {
	t.Helper()
	byID := map[string]ExampleOPUser{}
	for _, u := range users {
		byID[u.ID] = u
	}
	data, err := json.Marshal(byID)
	require.NoError(t, err)
	usersFile := filepath.Join(t.TempDir(), "users.json")
	require.NoError(t, os.WriteFile(usersFile, data, 0o600))
	// The example listens on a port it is given: a free one, found and released just before.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	require.NoError(t, ln.Close())
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = append(os.Environ(), "PORT="+port, "USERS_FILE="+usersFile, "REDIRECT_URI="+redirectURL)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("example OpenID Provider's output:\n%s", out.String())
		}
	})
	issuer := "http://localhost:" + port + "/"
	waitForTCP(t, "127.0.0.1:"+port)
	return ExampleOP{Issuer: issuer, Client: Provider{Issuer: issuer, ClientID: "web", ClientSecret: "secret"}}
}

// waitForTCP waits until something accepts connections at addr: a start, not a timing.
func waitForTCP(t testing.TB, addr string) {
	t.Helper()
	bench.Eventually(t, "the example OpenID Provider to listen at "+addr, 30*time.Second, func() (bool, any) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err
		}
		c.Close()
		return true, nil
	})
}
