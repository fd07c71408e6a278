package policies

import (
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// capabilities are OPA's built-in functions minus the ones that reach outside
// (http.send, net.lookup_ip_addr, opa.runtime) or give different answers on
// different calls (time.now_ns, rand.intn, uuid.rfc4122, ...): policy results
// must be a function of the input, or the result digest an override binds to
// would change between two evaluations of the same plan.
var capabilities = sync.OnceValue(func() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	kept := caps.Builtins[:0]
	for _, b := range caps.Builtins {
		if b.Nondeterministic || unsafeBuiltins[b.Name] {
			continue
		}
		kept = append(kept, b)
	}
	caps.Builtins = kept
	return caps
})

var unsafeBuiltins = map[string]bool{"http.send": true, "net.lookup_ip_addr": true, "opa.runtime": true}

func parserOptions() ast.ParserOptions {
	return ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: capabilities()}
}

func newCompiler() *ast.Compiler {
	return ast.NewCompiler().WithCapabilities(capabilities()).WithDefaultRegoVersion(ast.RegoV1).WithEnablePrintStatements(false)
}
