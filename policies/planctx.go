package policies

import "github.com/open-policy-agent/opa/v1/ast"

// planCtx is where a value is in a plan document, as far as masking cares: the
// parser passes it down so that it masks the objects that carry sensitivity
// markers (and only those) when it has read them whole.
type planCtx uint8

const (
	ctxNone           planCtx = iota // nothing to mask in here
	ctxPlan                          // the plan document
	ctxChanges                       // resource_changes, resource_drift
	ctxResourceChange                // one of their elements
	ctxOutputChanges                 // output_changes
	ctxState                         // planned_values, prior_state.values
	ctxPriorState                    // prior_state
	ctxModules                       // child_modules
	ctxModule                        // root_module, an element of child_modules
	ctxResources                     // a module's resources
	ctxOutputs                       // planned_values.outputs, prior_state.values.outputs
	// The objects masked, when the parser has read them:
	ctxChange   // resource_changes[].change, output_changes.<name>: before, after
	ctxResource // a state resource: values by sensitive_values
	ctxOutput   // a state output: value if sensitive
)

// child is the context of the value of key in an object of context c.
func (c planCtx) child(key ast.String) planCtx {
	switch c {
	case ctxPlan:
		switch key {
		case "resource_changes", "resource_drift":
			return ctxChanges
		case "output_changes":
			return ctxOutputChanges
		case "planned_values":
			return ctxState
		case "prior_state":
			return ctxPriorState
		}
	case ctxResourceChange:
		if key == "change" {
			return ctxChange
		}
	case ctxOutputChanges:
		return ctxChange
	case ctxPriorState:
		if key == "values" {
			return ctxState
		}
	case ctxState:
		switch key {
		case "root_module":
			return ctxModule
		case "outputs":
			return ctxOutputs
		}
	case ctxModule:
		switch key {
		case "resources":
			return ctxResources
		case "child_modules":
			return ctxModules
		}
	case ctxOutputs:
		return ctxOutput
	}
	return ctxNone
}

// elem is the context of the elements of an array of context c.
func (c planCtx) elem() planCtx {
	switch c {
	case ctxChanges:
		return ctxResourceChange
	case ctxModules:
		return ctxModule
	case ctxResources:
		return ctxResource
	}
	return ctxNone
}

// masks reports whether the parser hands objects of context c to masker.object.
func (c planCtx) masks() bool { return c >= ctxChange }

// isMarkerKey reports whether a key's value is a sensitivity marker.
func isMarkerKey(k ast.String) bool {
	switch k {
	case "before_sensitive", "after_sensitive", "sensitive_values", "sensitive":
		return true
	}
	return false
}
