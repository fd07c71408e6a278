package mock

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

func TestCIDRFunctions(t *testing.T) {
	t.Parallel()
	subnet := func(prefix string, newbits, netnum int64) (string, error) {
		v, err := cidrSubnetFunc.Call([]cty.Value{cty.StringVal(prefix), cty.NumberIntVal(newbits), cty.NumberIntVal(netnum)})
		if err != nil {
			return "", err
		}
		return v.AsString(), nil
	}
	for _, tc := range []struct {
		prefix          string
		newbits, netnum int64
		want            string
	}{
		{"10.20.0.0/16", 8, 1, "10.20.1.0/24"},
		{"10.0.0.0/16", 8, 2, "10.0.2.0/24"},
		{"10.0.0.0/8", 4, 15, "10.240.0.0/12"},
		{"10.1.2.3/16", 0, 0, "10.1.0.0/16"}, // masked to the network, as tofu does
		{"fd00::/56", 8, 255, "fd00:0:0:ff::/64"},
	} {
		got, err := subnet(tc.prefix, tc.newbits, tc.netnum)
		require.NoError(t, err, tc.prefix)
		require.Equal(t, tc.want, got, tc.prefix)
	}
	_, err := subnet("10.0.0.0/16", 8, 256)
	require.ErrorContains(t, err, "does not accommodate a subnet numbered 256")
	_, err = subnet("10.0.0.0/30", 8, 1)
	require.ErrorContains(t, err, "insufficient address space")
	_, err = subnet("not a cidr", 8, 1)
	require.ErrorContains(t, err, "invalid CIDR expression")

	host, err := cidrHostFunc.Call([]cty.Value{cty.StringVal("10.12.112.0/20"), cty.NumberIntVal(16)})
	require.NoError(t, err)
	require.Equal(t, "10.12.112.16", host.AsString())
	host, err = cidrHostFunc.Call([]cty.Value{cty.StringVal("10.12.112.0/20"), cty.NumberIntVal(-2)})
	require.NoError(t, err)
	require.Equal(t, "10.12.127.254", host.AsString())
	mask, err := cidrNetmaskFunc.Call([]cty.Value{cty.StringVal("172.16.0.0/12")})
	require.NoError(t, err)
	require.Equal(t, "255.240.0.0", mask.AsString())
}

func TestConversionFunctions(t *testing.T) {
	t.Parallel()
	v, err := functions["tostring"].Call([]cty.Value{cty.NumberIntVal(5)})
	require.NoError(t, err)
	require.Equal(t, cty.StringVal("5"), v)
	_, err = functions["tonumber"].Call([]cty.Value{cty.StringVal("five")})
	require.Error(t, err)
	v, err = functions["tolist"].Call([]cty.Value{cty.TupleVal([]cty.Value{cty.StringVal("a")})})
	require.NoError(t, err)
	require.Equal(t, cty.ListVal([]cty.Value{cty.StringVal("a")}), v)
}

// TestSHA256AndLength: sha256 is tofu's hex digest of a string, and length counts a
// string's characters as well as a collection's elements; a sensitive argument gives a
// sensitive result.
func TestSHA256AndLength(t *testing.T) {
	t.Parallel()
	sum, err := sha256Func.Call([]cty.Value{cty.StringVal("abc")})
	require.NoError(t, err)
	require.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", sum.AsString())
	marked, err := sha256Func.Call([]cty.Value{cty.StringVal("abc").Mark(sensitiveMark)})
	require.NoError(t, err)
	require.True(t, marked.HasMark(sensitiveMark))

	for _, tc := range []struct {
		in   cty.Value
		want int64
	}{
		{cty.StringVal("héllo"), 5},
		{cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")}), 2},
		{cty.MapVal(map[string]cty.Value{"k": cty.True}), 1},
	} {
		n, err := lengthFunc.Call([]cty.Value{tc.in})
		require.NoError(t, err)
		require.True(t, n.Equals(cty.NumberIntVal(tc.want)).True(), "%#v", tc.in)
	}
	n, err := lengthFunc.Call([]cty.Value{cty.StringVal("a secret").Mark(sensitiveMark)})
	require.NoError(t, err)
	require.True(t, n.HasMark(sensitiveMark))
	_, err = lengthFunc.Call([]cty.Value{cty.True})
	require.Error(t, err)
}
