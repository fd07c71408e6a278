package review

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"gantry/models/classify"
)

// CostLine is the monthly cost of one resource type before and after the plan.
type CostLine struct {
	Type                  string
	Before, After         int // managed resources of the type
	UnitPrice             float64
	BeforeCost, AfterCost float64
}

// Cost is the monthly cost before and after the plan, from a price table.
type Cost struct {
	Before, After, Delta float64
	Lines                []CostLine // priced types present before or after, sorted by type
	Unpriced             []string   // managed types with changes but no price, sorted
	// NoPrice: the plan counts managed resources but the price table prices none of
	// their types (a team namespace costs what runs in it). The totals are then 0 by
	// absence, not a price of nothing: Amounts says NoPrice instead of $0.00.
	NoPrice bool
}

// NoPrice is what a reviewer reads where the price table gives no amount.
const NoPrice = "no price"

// NoPriceFor says which changed types have no price, "no price for a, b", or just
// NoPrice when only unchanged ones lack one.
func (c Cost) NoPriceFor() string {
	if len(c.Unpriced) == 0 {
		return NoPrice
	}
	return NoPrice + " for " + strings.Join(c.Unpriced, ", ")
}

// Amounts are the before, after and change amounts as a reviewer reads them: money,
// or NoPrice for each when nothing the plan counts has a price.
func (c Cost) Amounts() (before, after, delta string) {
	if c.NoPrice {
		return NoPrice, NoPrice, NoPrice
	}
	return Money(c.Before), Money(c.After), SignedMoney(c.Delta)
}

// EstimateCost counts managed resources before and after the plan from the classification: before = update,
// replace, destroy and no-op entries; after = create, update, replace and no-op; reads (data sources) and
// deposed objects are not counted.
//
// prices is the template's monthly price per resource type; a type with a
// price of 0 is priced (free). A type without a price is in Unpriced when the
// plan changes some resource of it, and left out of the totals; when no counted
// type has a price, the cost is NoPrice. Money is
// rounded to cents: each line's costs, then the totals from the rounded lines.
func EstimateCost(res classify.Result, prices map[string]float64) Cost {
	type count struct {
		before, after int
		changed       bool
	}
	counts := map[string]*count{}
	for i := range res.Changes {
		c := &res.Changes[i]
		if c.Deposed != "" || c.Class == classify.ClassRead || isData(c) {
			continue
		}
		n := counts[c.Type]
		if n == nil {
			n = &count{}
			counts[c.Type] = n
		}
		switch c.Class {
		case classify.ClassCreate:
			n.after++
			n.changed = true
		case classify.ClassUpdate, classify.ClassReplace:
			n.before++
			n.after++
			n.changed = true
		case classify.ClassDestroy:
			n.before++
			n.changed = true
		case classify.ClassNoOp:
			n.before++
			n.after++
		}
	}
	var out Cost
	for typ, n := range counts {
		price, ok := prices[typ]
		if !ok {
			if n.changed {
				out.Unpriced = append(out.Unpriced, typ)
			}
			continue
		}
		line := CostLine{
			Type: typ, Before: n.before, After: n.after, UnitPrice: price,
			BeforeCost: cents(float64(n.before) * price), AfterCost: cents(float64(n.after) * price),
		}
		out.Lines = append(out.Lines, line)
		out.Before += line.BeforeCost
		out.After += line.AfterCost
	}
	out.NoPrice = len(out.Lines) == 0 && len(counts) > 0
	sort.Slice(out.Lines, func(a, b int) bool { return out.Lines[a].Type < out.Lines[b].Type })
	sort.Strings(out.Unpriced)
	out.Before, out.After = cents(out.Before), cents(out.After)
	out.Delta = cents(out.After - out.Before)
	return out
}

// isData reports a data source ("data.t.n", "module.m.data.t.n"); the plan
// lists them as reads, but a data source never costs anything whatever its class.
func isData(c *classify.Change) bool {
	rest := c.Address
	if c.ModuleAddress != "" {
		rest = strings.TrimPrefix(rest, c.ModuleAddress+".")
	}
	return strings.HasPrefix(rest, "data.")
}

func cents(x float64) float64 {
	r := math.Round(x*100) / 100
	if r == 0 {
		return 0 // no "-0"
	}
	return r
}

// Money formats an amount of the price list's currency, e.g. "$64.50".
func Money(v float64) string { return fmt.Sprintf("$%.2f", v) }

// SignedMoney formats a change of cost with its sign, e.g. "+$64.50", "-$2.30", "$0.00".
func SignedMoney(v float64) string {
	switch {
	case v > 0:
		return "+" + Money(v)
	case v < 0:
		return "-" + Money(-v)
	}
	return Money(0)
}
