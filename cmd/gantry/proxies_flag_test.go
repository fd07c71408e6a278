package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTrustedProxiesFlag: gantry serve and gantry dev trust no proxy unless
// --trusted-proxies (or $GANTRY_TRUSTED_PROXIES) names one: the web layer then takes the
// connection's peer as the client. --help says so.
func TestTrustedProxiesFlag(t *testing.T) {
	t.Setenv("GANTRY_TRUSTED_PROXIES", "")
	parse := func(args ...string) webFlags {
		t.Helper()
		var w webFlags
		var out bytes.Buffer
		f := newFlags("serve", "", &out)
		w.register(f, ":8080", "", "http://localhost:8080")
		require.NoError(t, f.parse(args))
		return w
	}
	require.Nil(t, parse().proxies(), "no proxy unless configured")
	require.Equal(t, []string{"10.42.0.0/16", "fd00::/8"}, parse("--trusted-proxies", " 10.42.0.0/16, fd00::/8 ,").proxies())

	t.Setenv("GANTRY_TRUSTED_PROXIES", "192.168.0.0/16")
	require.Equal(t, []string{"192.168.0.0/16"}, parse().proxies(), "from the environment, as the chart sets it")

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"help", "serve"}, &out, &errOut))
	require.Contains(t, out.String(), "default: none, the client is the connection's peer")
}
