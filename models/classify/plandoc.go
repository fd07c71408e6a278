// The parts of a `tofu show -json` plan document that Classify reads; the
// JSON has more, which the decoder skips.

package classify

import "encoding/json"

type planDoc struct {
	FormatVersion   string     `json:"format_version"`
	ResourceChanges []rcDoc    `json:"resource_changes"`
	PriorState      *priorDoc  `json:"prior_state"`
	Configuration   *configDoc `json:"configuration"`
}

type rcDoc struct {
	Address       string          `json:"address"`
	ModuleAddress string          `json:"module_address"`
	Mode          string          `json:"mode"`
	Type          string          `json:"type"`
	Name          string          `json:"name"`
	Index         json.RawMessage `json:"index"`
	Deposed       string          `json:"deposed"`
	Change        struct {
		Actions      []string `json:"actions"`
		ReplacePaths [][]any  `json:"replace_paths"`
	} `json:"change"`
	ActionReason string `json:"action_reason"`
}

type priorDoc struct {
	Values *struct {
		RootModule stateModule `json:"root_module"`
	} `json:"values"`
}

type stateModule struct {
	Resources []struct {
		Address   string   `json:"address"`
		DependsOn []string `json:"depends_on"`
	} `json:"resources"`
	ChildModules []stateModule `json:"child_modules"`
}

type configDoc struct {
	RootModule configModule `json:"root_module"`
}

type configModule struct {
	Outputs     map[string]configOutput `json:"outputs"`
	Resources   []configResource        `json:"resources"`
	ModuleCalls map[string]moduleCall   `json:"module_calls"`
}

type configOutput struct {
	Expression any      `json:"expression"`
	DependsOn  []string `json:"depends_on"`
}

type configResource struct {
	Address           string         `json:"address"`
	Expressions       map[string]any `json:"expressions"`
	CountExpression   any            `json:"count_expression"`
	ForEachExpression any            `json:"for_each_expression"`
	DependsOn         []string       `json:"depends_on"`
}

type moduleCall struct {
	Expressions       map[string]any `json:"expressions"`
	CountExpression   any            `json:"count_expression"`
	ForEachExpression any            `json:"for_each_expression"`
	DependsOn         []string       `json:"depends_on"`
	Module            configModule   `json:"module"`
}
