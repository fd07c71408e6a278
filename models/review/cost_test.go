package review

import (
	"reflect"
	"testing"

	"gantry/models/classify"
)

func TestEstimateCost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		res    classify.Result
		prices map[string]float64
		want   Cost
	}{
		{
			name:   "create only",
			res:    classifyFile(t, "create.json"),
			prices: map[string]float64{"sandbox_network": 10, "sandbox_subnet": 2.5, "sandbox_unused": 99},
			want: Cost{Before: 0, After: 12.5, Delta: 12.5, Lines: []CostLine{
				{Type: "sandbox_network", Before: 0, After: 1, UnitPrice: 10, BeforeCost: 0, AfterCost: 10},
				{Type: "sandbox_subnet", Before: 0, After: 1, UnitPrice: 2.5, BeforeCost: 0, AfterCost: 2.5},
			}},
		},
		{
			// Replaces keep the count; the dns record changes but has no price;
			// no-op types without a price are not "unpriced changes".
			name:   "replace: unchanged count",
			res:    classifyFile(t, "replace_network.json"),
			prices: map[string]float64{"sandbox_network": 12.34, "sandbox_database": 99.99, "sandbox_subnet": 0},
			want: Cost{Before: 112.33, After: 112.33, Delta: 0, Lines: []CostLine{
				{Type: "sandbox_database", Before: 1, After: 1, UnitPrice: 99.99, BeforeCost: 99.99, AfterCost: 99.99},
				{Type: "sandbox_network", Before: 1, After: 1, UnitPrice: 12.34, BeforeCost: 12.34, AfterCost: 12.34},
				{Type: "sandbox_subnet", Before: 1, After: 1, UnitPrice: 0, BeforeCost: 0, AfterCost: 0},
			}, Unpriced: []string{"sandbox_dns_record"}},
		},
		{
			name:   "destroy: decrease",
			res:    classifyFile(t, "destroy.json"),
			prices: map[string]float64{"sandbox_network": 10, "sandbox_database": 50.5, "sandbox_backup": 1.25, "sandbox_subnet": 3},
			want: Cost{Before: 64.75, After: 10, Delta: -54.75, Lines: []CostLine{
				{Type: "sandbox_backup", Before: 1, After: 0, UnitPrice: 1.25, BeforeCost: 1.25, AfterCost: 0},
				{Type: "sandbox_database", Before: 1, After: 0, UnitPrice: 50.5, BeforeCost: 50.5, AfterCost: 0},
				{Type: "sandbox_network", Before: 1, After: 1, UnitPrice: 10, BeforeCost: 10, AfterCost: 10},
				{Type: "sandbox_subnet", Before: 1, After: 0, UnitPrice: 3, BeforeCost: 3, AfterCost: 0},
			}},
		},
		{
			// Data sources are never priced nor unpriced.
			name:   "mix: unpriced types, reads left out",
			res:    classifyFile(t, "mix.json"),
			prices: map[string]float64{"sandbox_vm": 20, "sandbox_bucket": 0.1, "sandbox_image": 5, "sandbox_lookup": 5},
			want: Cost{Before: 0.1, After: 20, Delta: 19.9, Lines: []CostLine{
				{Type: "sandbox_bucket", Before: 1, After: 0, UnitPrice: 0.1, BeforeCost: 0.1, AfterCost: 0},
				{Type: "sandbox_vm", Before: 0, After: 1, UnitPrice: 20, BeforeCost: 0, AfterCost: 20},
			}, Unpriced: []string{"sandbox_network", "sandbox_route", "sandbox_tag"}},
		},
		{
			name:   "no prices",
			res:    classifyFile(t, "update.json"),
			prices: nil,
			want:   Cost{Unpriced: []string{"sandbox_network", "sandbox_org_policy"}, NoPrice: true},
		},
		{
			// The team namespace template prices none of its types (catalog/templates/
			// team-namespace): the totals are no price, not $0.00.
			name:   "kubernetes types without prices",
			res:    classifyFile(t, "team_namespace_create.json"),
			prices: nil,
			want: Cost{Unpriced: []string{"kubernetes_limit_range", "kubernetes_namespace", "kubernetes_resource_quota", "kubernetes_role_binding"},
				NoPrice: true},
		},
		{
			// Unchanged unpriced types are not listed, and still leave nothing priced.
			name:   "kubernetes role binding update",
			res:    classifyFile(t, "team_namespace_regroup.json"),
			prices: map[string]float64{"sandbox_network": 1},
			want:   Cost{Unpriced: []string{"kubernetes_role_binding"}, NoPrice: true},
		},
		{
			// One priced type is enough for the totals to mean something.
			name:   "kubernetes types beside a priced one",
			res:    classifyFile(t, "team_namespace_create.json"),
			prices: map[string]float64{"kubernetes_resource_quota": 0},
			want: Cost{Lines: []CostLine{{Type: "kubernetes_resource_quota", After: 1}},
				Unpriced: []string{"kubernetes_limit_range", "kubernetes_namespace", "kubernetes_role_binding"}},
		},
		{
			name: "nothing counted",
			res:  classify.Result{},
			want: Cost{},
		},
		{
			// 3 x 0.1 is 0.30000000000000004 in floating point; deposed
			// objects and data sources in modules (whatever their class) are
			// not counted.
			name: "cents, deposed, module data sources",
			res: classify.Result{Changes: []classify.Change{
				{Address: "t.a", Type: "t", Class: classify.ClassNoOp},
				{Address: "t.b", Type: "t", Class: classify.ClassNoOp},
				{Address: "t.c", Type: "t", Class: classify.ClassNoOp},
				{Address: "t.d", Type: "t", Class: classify.ClassCreate},
				{Address: "t.a", Type: "t", Class: classify.ClassDestroy, Deposed: "0badc0de"},
				{Address: "module.m[0].data.t.x", ModuleAddress: "module.m[0]", Type: "t", Class: classify.ClassNoOp},
				{Address: "data.t.y", Type: "t", Class: classify.ClassRead},
				{Address: "u.z", Type: "u", Class: classify.ClassCreate},
			}},
			prices: map[string]float64{"t": 0.1, "u": 1.0 / 3},
			want: Cost{Before: 0.3, After: 0.73, Delta: 0.43, Lines: []CostLine{
				{Type: "t", Before: 3, After: 4, UnitPrice: 0.1, BeforeCost: 0.3, AfterCost: 0.4},
				{Type: "u", Before: 0, After: 1, UnitPrice: 1.0 / 3, BeforeCost: 0, AfterCost: 0.33},
			}},
		},
	}
	for _, tt := range tests {
		got := EstimateCost(tt.res, tt.prices)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

// What a reviewer reads: money, or "no price" where nothing counted has one.
func TestCostAmounts(t *testing.T) {
	t.Parallel()
	noPrice := EstimateCost(classifyFile(t, "team_namespace_create.json"), nil)
	before, after, delta := noPrice.Amounts()
	if before != "no price" || after != "no price" || delta != "no price" {
		t.Errorf("unpriced kubernetes types: got %q %q %q, want no price three times", before, after, delta)
	}
	if got := noPrice.NoPriceFor(); got != "no price for kubernetes_limit_range, kubernetes_namespace, kubernetes_resource_quota, kubernetes_role_binding" {
		t.Errorf("NoPriceFor: %q", got)
	}
	if got := (Cost{NoPrice: true}).NoPriceFor(); got != "no price" {
		t.Errorf("NoPriceFor without changed types: %q", got)
	}
	free := EstimateCost(classifyFile(t, "team_namespace_create.json"), map[string]float64{"kubernetes_namespace": 0})
	before, after, delta = free.Amounts()
	if before != "$0.00" || after != "$0.00" || delta != "$0.00" {
		t.Errorf("a free namespace: got %q %q %q, want $0.00 three times", before, after, delta)
	}
	before, after, delta = Cost{Before: 10, After: 12.5, Delta: 2.5}.Amounts()
	if before != "$10.00" || after != "$12.50" || delta != "+$2.50" {
		t.Errorf("priced: got %q %q %q", before, after, delta)
	}
}
