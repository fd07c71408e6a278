// Package secret holds the values of a run's sensitive inputs on their way from the
// run that sealed them to the OpenTofu process that reads them. It is a leaf: models/run
// hands them to the worker and runner hands them to an executor as the same type, so
// the rule that keeps them out of logs is written once.
package secret

import "log/slog"

// Variables are the values of a run's sensitive inputs, by root variable name, as
// OpenTofu parses TF_VAR_<name> (a string as it is, a number in decimal, a bool "true"
// or "false"). An executor sets them only as TF_VAR_<name> in tofu's process
// environment, never in a file; the config bundle only declares them. They are
// secrets: logs, %v and JSON show none of them, on their own or inside a struct.
type Variables map[string]string

// redacted is what a log line or a formatted value shows of Variables.
const redacted = "[variables redacted]"

// LogValue keeps the values out of slog output.
func (Variables) LogValue() slog.Value { return slog.StringValue(redacted) }

// String and GoString keep the values out of %v, %+v and %#v.
func (Variables) String() string   { return redacted }
func (Variables) GoString() string { return redacted }

// MarshalJSON keeps the values out of any JSON they are encoded into (slog's JSON
// handler encodes structs with encoding/json).
func (Variables) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
