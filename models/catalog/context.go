package catalog

import (
	"fmt"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// Context variables: a template module that declares one of these variables gets it
// from the run (GenerateInput), never from a person, so a label or a name can say
// which workspace made a resource and no one can claim another's.
const (
	VarEnvironmentID  = "gantry_environment_id"
	VarOrganizationID = "gantry_organization_id"
	VarWorkspaceID    = "gantry_workspace_id"
)

// contextPrefix starts every context variable; inputs may not use it, so a later
// context variable cannot collide with an input of an existing template.
const contextPrefix = "gantry_"

// contextVariables are the context variables in the order their arguments sort.
var contextVariables = []string{VarEnvironmentID, VarOrganizationID, VarWorkspaceID}

// contextValue is the value of context variable name for in, and what it is in words.
func (in GenerateInput) contextValue(name string) (value, what string) {
	switch name {
	case VarEnvironmentID:
		return in.EnvironmentID, "environment id"
	case VarOrganizationID:
		return in.OrganizationID, "organization id"
	}
	return in.WorkspaceID, "workspace id"
}

// isContextVariable reports whether a module variable is one Gantry sets.
func isContextVariable(name string) bool {
	for _, v := range contextVariables {
		if v == name {
			return true
		}
	}
	return false
}

// contextArguments are the module arguments for the context variables the module
// declares. An id the run did not give is an error, not an empty string: a label
// "gantry.dev/workspace = """ would match nothing, or everything.
func contextArguments(info moduleInfo, in GenerateInput) ([]argument, error) {
	var out []argument
	for _, name := range contextVariables {
		if _, declared := info.variables[name]; !declared {
			continue
		}
		value, what := in.contextValue(name)
		switch {
		case value == "":
			return nil, fmt.Errorf("the module declares %s, but no %s was given", name, what)
		case !workspaceIDRe.MatchString(value):
			return nil, fmt.Errorf("%s %q is not a plain id", what, value)
		}
		out = append(out, argument{name: name, value: cty.StringVal(value)})
	}
	return out, nil
}

// reservedInput says why an input name is reserved, or "".
func reservedInput(name string) string {
	if !strings.HasPrefix(name, contextPrefix) {
		return ""
	}
	return fmt.Sprintf("names starting with %s are reserved for what Gantry sets itself (%s)", contextPrefix, strings.Join(contextVariables, ", "))
}
