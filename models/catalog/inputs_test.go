package catalog_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/catalog"
)

func realTemplate(t *testing.T, name string) catalog.Template {
	t.Helper()
	e, err := load(t, os.DirFS("../../catalog"), nil).Get(name)
	require.NoError(t, err)
	return e.Template
}

func TestValidateInputsAppliesDefaults(t *testing.T) {
	t.Parallel()
	network := realTemplate(t, "network")
	got, v := network.ValidateInputs(map[string]string{"name": "core-net", "subnet_count": " 3 ", "cidr": ""})
	require.Nil(t, v)
	require.Equal(t, map[string]any{
		"name":         "core-net",
		"cidr":         "10.20.0.0/16", // empty counts as absent
		"subnet_count": 3.0,
		"region":       "eu-west",
	}, got)

	bucket := realTemplate(t, "bucket")
	got, v = bucket.ValidateInputs(map[string]string{"name": "logs", "versioning": "false", "retention_days": "0", "region": "us-east"})
	require.Nil(t, v)
	require.Equal(t, map[string]any{"name": "logs", "versioning": false, "retention_days": 0.0, "region": "us-east"}, got)
}

func TestValidateInputsRules(t *testing.T) {
	t.Parallel()
	network := realTemplate(t, "network")
	bucket := realTemplate(t, "bucket")
	cases := []struct {
		name     string
		template catalog.Template
		raw      map[string]string
		field    string
		message  string
	}{
		{"missing required", network, map[string]string{}, "inputs.name", "Enter a value."},
		{"blank required", network, map[string]string{"name": ""}, "inputs.name", "Enter a value."},
		{"not a number", network, map[string]string{"name": "core", "subnet_count": "two"}, "inputs.subnet_count", "Enter a whole number, digits only (for example 20)."},
		{"no exponents", network, map[string]string{"name": "core", "subnet_count": "1e0"}, "inputs.subnet_count", "Enter a whole number, digits only (for example 20)."},
		{"an integer has no decimals", network, map[string]string{"name": "core", "subnet_count": "2.5"}, "inputs.subnet_count", "Enter a whole number: 2.5 has decimals."},
		{"days are whole", bucket, map[string]string{"name": "logs", "retention_days": "12.5"}, "inputs.retention_days", "Enter a whole number: 12.5 has decimals."},
		{"a decimal number that is not one", realTemplate(t, "postgres"), map[string]string{"name": "orders", "storage_gb": "twelve"}, "inputs.storage_gb", "Enter a whole number, digits only (for example 20)."},
		{"not a bool", bucket, map[string]string{"name": "logs", "versioning": "yes"}, "inputs.versioning", "Choose true or false."},
		{"above max", network, map[string]string{"name": "core", "subnet_count": "7"}, "inputs.subnet_count", "Enter a number from 1 to 6."},
		{"below min", network, map[string]string{"name": "core", "subnet_count": "0"}, "inputs.subnet_count", "Enter a number from 1 to 6."},
		{"not in enum", network, map[string]string{"name": "core", "region": "mars"}, "inputs.region", "Choose one of: eu-west, eu-central, us-east."},
		{"pattern says what is wrong", network, map[string]string{"name": "Core"}, "inputs.name", `"C" is not allowed here: use lower-case letters, digits and hyphens.`},
		{"pattern falls back to help", network, map[string]string{"name": "core", "cidr": "10.1.0.0/24"}, "inputs.cidr", "Address range of the network, a /16 inside 10.0.0.0/8."},
		{"pattern is anchored", network, map[string]string{"name": "core", "cidr": "x10.1.0.0/16"}, "inputs.cidr", `"x" is not allowed here: use digits, dots and slashes.`},
		{"anchored, same characters", network, map[string]string{"name": "core", "cidr": "110.1.0.0/16"}, "inputs.cidr", "Address range of the network, a /16 inside 10.0.0.0/8."},
		{"unknown input", network, map[string]string{"name": "core", "colour": "blue"}, "inputs.colour", "This template has no input named colour."},
	}
	for _, tc := range cases {
		got, v := tc.template.ValidateInputs(tc.raw)
		require.Nil(t, got, tc.name)
		require.NotNil(t, v, tc.name)
		require.Equal(t, map[string]string{tc.field: tc.message}, v.Fields, tc.name)
		require.Error(t, v.Err(), tc.name)
	}
}

func TestValidateInputsWithoutHelpAndNumericEnum(t *testing.T) {
	t.Parallel()
	lo, hi := 2.0, 8.0
	tmpl := catalog.Template{Inputs: []catalog.Input{
		{Name: "code", Type: catalog.TypeString, Pattern: "[A-Z]{3}"},
		{Name: "ratio", Type: catalog.TypeNumber, Enum: []string{"1", "2.5"}},
		{Name: "floor", Type: catalog.TypeNumber, Min: &lo},
		{Name: "ceiling", Type: catalog.TypeNumber, Max: &hi},
	}}
	got, v := tmpl.ValidateInputs(map[string]string{"code": "ABC", "ratio": "2.50", "floor": "2", "ceiling": "-3"})
	require.Nil(t, v)
	require.Equal(t, map[string]any{"code": "ABC", "ratio": 2.5, "floor": 2.0, "ceiling": -3.0}, got)

	_, v = tmpl.ValidateInputs(map[string]string{"code": "ABCD", "ratio": "2", "floor": "1.5", "ceiling": "8.01"})
	require.NotNil(t, v)
	require.Equal(t, map[string]string{
		"inputs.code":    "Too long: at most 3 characters (this has 4).",
		"inputs.ratio":   "Choose one of: 1, 2.5.",
		"inputs.floor":   "Enter a number of at least 2.",
		"inputs.ceiling": "Enter a number of at most 8.",
	}, v.Fields)
}
