package mock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/netip"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// functions is the subset of tofu's built-in functions the mock evaluates. A
// template calling anything else is refused at load time with the file and line,
// rather than silently planning something tofu would plan differently.
var functions = map[string]function.Function{
	"abs":         stdlib.AbsoluteFunc,
	"ceil":        stdlib.CeilFunc,
	"chomp":       stdlib.ChompFunc,
	"cidrhost":    cidrHostFunc,
	"cidrnetmask": cidrNetmaskFunc,
	"cidrsubnet":  cidrSubnetFunc,
	"coalesce":    stdlib.CoalesceFunc,
	"compact":     stdlib.CompactFunc,
	"concat":      stdlib.ConcatFunc,
	"contains":    stdlib.ContainsFunc,
	"distinct":    stdlib.DistinctFunc,
	"element":     stdlib.ElementFunc,
	"flatten":     stdlib.FlattenFunc,
	"floor":       stdlib.FloorFunc,
	"format":      stdlib.FormatFunc,
	"formatlist":  stdlib.FormatListFunc,
	"join":        stdlib.JoinFunc,
	"jsonencode":  stdlib.JSONEncodeFunc,
	"keys":        stdlib.KeysFunc,
	"length":      lengthFunc,
	"lookup":      stdlib.LookupFunc,
	"lower":       stdlib.LowerFunc,
	"max":         stdlib.MaxFunc,
	"merge":       stdlib.MergeFunc,
	"min":         stdlib.MinFunc,
	"range":       stdlib.RangeFunc,
	"replace":     stdlib.ReplaceFunc,
	"sha256":      sha256Func,
	"sort":        stdlib.SortFunc,
	"split":       stdlib.SplitFunc,
	"substr":      stdlib.SubstrFunc,
	"title":       stdlib.TitleFunc,
	"tobool":      makeToFunc(cty.Bool),
	"tolist":      makeToFunc(cty.List(cty.DynamicPseudoType)),
	"tomap":       makeToFunc(cty.Map(cty.DynamicPseudoType)),
	"tonumber":    makeToFunc(cty.Number),
	"toset":       makeToFunc(cty.Set(cty.DynamicPseudoType)),
	"tostring":    makeToFunc(cty.String),
	"trimspace":   stdlib.TrimSpaceFunc,
	"upper":       stdlib.UpperFunc,
	"values":      stdlib.ValuesFunc,
	"zipmap":      stdlib.ZipmapFunc,
}

// makeToFunc builds a tofu-style type conversion function (tostring, tolist, ...).
func makeToFunc(want cty.Type) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{
			Name: "v", Type: cty.DynamicPseudoType,
			AllowNull: true, AllowUnknown: true, AllowDynamicType: true,
		}},
		Type: func(args []cty.Value) (cty.Type, error) {
			got := args[0].Type()
			if want.HasDynamicTypes() {
				// tolist/tomap/toset: the element type comes from the argument.
				v, err := convert.Convert(args[0], want)
				if err != nil {
					return cty.NilType, function.NewArgErrorf(0, "cannot convert %s to %s", got.FriendlyName(), want.FriendlyNameForConstraint())
				}
				return v.Type(), nil
			}
			if convert.GetConversionUnsafe(got, want) == nil {
				return cty.NilType, function.NewArgErrorf(0, "cannot convert %s to %s", got.FriendlyName(), want.FriendlyName())
			}
			return want, nil
		},
		Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
			v, err := convert.Convert(args[0], retType)
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "cannot convert %s to %s", args[0].Type().FriendlyName(), retType.FriendlyName())
			}
			return v, nil
		},
	})
}

// lengthFunc is tofu's length: the number of characters of a string, else of the
// elements of a collection (cty's length takes collections only).
var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowDynamicType: true, AllowUnknown: true}},
	Type: func(args []cty.Value) (cty.Type, error) {
		if args[0].Type() == cty.String {
			return cty.Number, nil
		}
		return stdlib.LengthFunc.ReturnType([]cty.Type{args[0].Type()})
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		switch {
		case v.Type() != cty.String:
			return stdlib.LengthFunc.Call(args)
		case !v.IsKnown():
			return cty.UnknownVal(cty.Number), nil
		}
		return stdlib.Strlen(v)
	},
})

// sha256Func is tofu's sha256(string): the hex digest of the string's UTF-8 bytes. A
// sensitive argument gives a sensitive digest (function.Call carries the marks over).
var sha256Func = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		sum := sha256.Sum256([]byte(args[0].AsString()))
		return cty.StringVal(hex.EncodeToString(sum[:])), nil
	},
})

// cidrSubnetFunc is tofu's cidrsubnet(prefix, newbits, netnum).
var cidrSubnetFunc = function.New(&function.Spec{
	Params: []function.Parameter{
		{Name: "prefix", Type: cty.String},
		{Name: "newbits", Type: cty.Number},
		{Name: "netnum", Type: cty.Number},
	},
	Type: function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		prefix, err := parsePrefix(args[0])
		if err != nil {
			return cty.NilVal, err
		}
		newbits, netnum := smallInt(args[1]), bigArg(args[2])
		if newbits < 0 {
			return cty.NilVal, function.NewArgErrorf(1, "newbits must be a whole number")
		}
		bits := prefix.Bits() + newbits
		if bits > prefix.Addr().BitLen() {
			return cty.NilVal, function.NewArgErrorf(1, "insufficient address space to extend prefix of %d by %d", prefix.Bits(), newbits)
		}
		if netnum.Sign() < 0 || netnum.BitLen() > newbits {
			return cty.NilVal, function.NewArgErrorf(2, "prefix extension of %d does not accommodate a subnet numbered %s", newbits, netnum)
		}
		base := addrToInt(prefix.Addr())
		base.Or(base, new(big.Int).Lsh(netnum, uint(prefix.Addr().BitLen()-bits)))
		return cty.StringVal(netip.PrefixFrom(intToAddr(base, prefix.Addr()), bits).String()), nil
	},
})

// cidrHostFunc is tofu's cidrhost(prefix, hostnum); negative numbers count from the end.
var cidrHostFunc = function.New(&function.Spec{
	Params: []function.Parameter{
		{Name: "prefix", Type: cty.String},
		{Name: "hostnum", Type: cty.Number},
	},
	Type: function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		prefix, err := parsePrefix(args[0])
		if err != nil {
			return cty.NilVal, err
		}
		hostnum := bigArg(args[1])
		hostBits := uint(prefix.Addr().BitLen() - prefix.Bits())
		size := new(big.Int).Lsh(big.NewInt(1), hostBits)
		if hostnum.Sign() < 0 {
			hostnum.Add(hostnum, size)
		}
		if hostnum.Sign() < 0 || hostnum.Cmp(size) >= 0 {
			return cty.NilVal, function.NewArgErrorf(1, "prefix of %d bits cannot accommodate a host numbered %s", prefix.Bits(), bigArg(args[1]))
		}
		addr := addrToInt(prefix.Addr())
		addr.Or(addr, hostnum)
		return cty.StringVal(intToAddr(addr, prefix.Addr()).String()), nil
	},
})

// cidrNetmaskFunc is tofu's cidrnetmask(prefix), IPv4 only as in tofu.
var cidrNetmaskFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "prefix", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		prefix, err := parsePrefix(args[0])
		if err != nil {
			return cty.NilVal, err
		}
		if !prefix.Addr().Is4() {
			return cty.NilVal, function.NewArgErrorf(0, "IPv6 addresses cannot have a netmask: %s", args[0].AsString())
		}
		mask := ^uint32(0) << (32 - prefix.Bits())
		if prefix.Bits() == 0 {
			mask = 0
		}
		return cty.StringVal(netip.AddrFrom4([4]byte{byte(mask >> 24), byte(mask >> 16), byte(mask >> 8), byte(mask)}).String()), nil
	},
})

// parsePrefix parses a CIDR string and masks it to its network address, as tofu does.
func parsePrefix(v cty.Value) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(v.AsString())
	if err != nil {
		return netip.Prefix{}, function.NewArgErrorf(0, "invalid CIDR expression: %s", err)
	}
	return p.Masked(), nil
}

func bigArg(v cty.Value) *big.Int {
	i, _ := v.AsBigFloat().Int(nil)
	return i
}

// smallInt reads a whole number of bits (0 to 128), or -1 when it is not one.
func smallInt(v cty.Value) int {
	f := v.AsBigFloat()
	if !f.IsInt() {
		return -1
	}
	i, acc := f.Int64()
	if acc != big.Exact || i < 0 || i > 128 {
		return -1
	}
	return int(i)
}

func addrToInt(a netip.Addr) *big.Int {
	return new(big.Int).SetBytes(a.AsSlice())
}

func intToAddr(i *big.Int, like netip.Addr) netip.Addr {
	buf := make([]byte, like.BitLen()/8)
	i.FillBytes(buf)
	addr, _ := netip.AddrFromSlice(buf)
	return addr
}

// checkFunctionName reports a call to a function the mock does not evaluate.
func checkFunctionName(name string) error {
	if _, ok := functions[name]; !ok {
		return fmt.Errorf("unsupported function %q in the mock runner", name)
	}
	return nil
}
