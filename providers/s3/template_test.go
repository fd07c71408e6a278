package s3

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestTemplateNamesAreBucketNames: every name the bucket-s3 template's input accepts, in a
// workspace of Gantry's ids ("ws-" and 20 base32 characters), makes a bucket name the provider
// accepts: gantry-<workspace id>-<name>, at most 63 characters.
func TestTemplateNamesAreBucketNames(t *testing.T) {
	raw, err := os.ReadFile("../../catalog/templates/bucket-s3/template.yaml")
	require.NoError(t, err)
	var tpl struct {
		Inputs []struct{ Name, Pattern string }
	}
	require.NoError(t, yaml.Unmarshal(raw, &tpl))
	var pattern *regexp.Regexp
	for _, in := range tpl.Inputs {
		if in.Name == "name" {
			pattern = regexp.MustCompile("^(?:" + in.Pattern + ")$")
		}
	}
	require.NotNil(t, pattern)
	ws := "ws-" + strings.Repeat("a2", 10)
	for _, name := range []string{"abc", "logs", "a-1", "z" + strings.Repeat("9", 31), strings.Repeat("ab-", 10) + "cd"} {
		require.True(t, pattern.MatchString(name), name)
		bucket := "gantry-" + ws + "-" + name
		require.Empty(t, BucketNameProblem(bucket), bucket)
	}
	for _, name := range []string{"ab", "Logs", "logs-", "1logs", "a.b", "a_b", "z" + strings.Repeat("9", 32)} {
		require.False(t, pattern.MatchString(name), name)
	}
	require.Len(t, "gantry-"+ws+"-z"+strings.Repeat("9", 31), 63, "the longest name fills the 63 characters")
}
