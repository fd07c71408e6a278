package chartcheck

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChartSetsTrustedProxies: gantry serve trusts no proxy unless told, so the chart
// tells it: by default the private networks an in-cluster ingress controller's pods have
// their addresses in (each a network the portal parses, none the whole internet); a
// narrower value is passed as given; "" sets nothing (the portal then trusts none).
func TestChartSetsTrustedProxies(t *testing.T) {
	t.Parallel()
	render := func(extra string) string {
		t.Helper()
		files := []string{filepath.Join(chartDir(t), "ci", "default-values.yaml")}
		if extra != "" {
			f := filepath.Join(t.TempDir(), "values.yaml")
			require.NoError(t, os.WriteFile(f, []byte(extra), 0o600))
			files = append(files, f)
		}
		manifest, err := Render(t.Context(), helm(t), chartDir(t), release, namespace, files...)
		require.NoError(t, err)
		objs, err := Decode(manifest)
		require.NoError(t, err)
		d := Sort(objs).Deployments[0]
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "GANTRY_TRUSTED_PROXIES" {
				return e.Value
			}
		}
		return "(unset)"
	}

	def := render("")
	require.Equal(t, "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7", def)
	for _, cidr := range strings.Split(def, ",") {
		ip, network, err := net.ParseCIDR(cidr)
		require.NoError(t, err, cidr)
		require.True(t, ip.IsPrivate(), "%s is a private network", cidr)
		ones, _ := network.Mask.Size()
		require.GreaterOrEqual(t, ones, 7, "%s is not the whole internet", cidr)
	}
	require.Equal(t, "10.244.0.0/16", render("config:\n  trustedProxies: 10.244.0.0/16\n"))
	require.Equal(t, "(unset)", render("config:\n  trustedProxies: \"\"\n"), "none: the portal trusts no proxy")
}
