package chat

import (
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// pySplit is Python's str.split / str.rsplit (fromRight) with sep (nil = runs of whitespace)
// and maxsplit (< 0 = no limit).
func pySplit(s string, sep *string, maxsplit int, fromRight bool) ([]any, error) {
	var parts []string
	switch {
	case sep == nil:
		parts = splitSpace(s, maxsplit, fromRight)
	case *sep == "":
		return nil, fmt.Errorf("empty separator")
	case maxsplit < 0:
		parts = strings.Split(s, *sep)
	case !fromRight:
		parts = strings.SplitN(s, *sep, maxsplit+1)
	default:
		for len(parts) < maxsplit {
			i := strings.LastIndex(s, *sep)
			if i < 0 {
				break
			}
			parts = append([]string{s[i+len(*sep):]}, parts...)
			s = s[:i]
		}
		parts = append([]string{s}, parts...)
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// splitSpace splits on whitespace runs; once maxsplit splits are made, the rest is one field with
// only its leading (or, from the right, trailing) whitespace removed.
func splitSpace(s string, maxsplit int, fromRight bool) []string {
	if maxsplit < 0 {
		return strings.FieldsFunc(s, isPySpace)
	}
	if fromRight {
		var parts []string
		s = strings.TrimRightFunc(s, isPySpace)
		for len(parts) < maxsplit && s != "" {
			i := strings.LastIndexFunc(s, isPySpace)
			if i < 0 {
				break
			}
			_, size := firstRune(s[i:])
			parts = append([]string{s[i+size:]}, parts...)
			s = strings.TrimRightFunc(s[:i], isPySpace)
		}
		if s != "" {
			parts = append([]string{s}, parts...)
		}
		return parts
	}
	var parts []string
	s = strings.TrimLeftFunc(s, isPySpace)
	for len(parts) < maxsplit && s != "" {
		i := strings.IndexFunc(s, isPySpace)
		if i < 0 {
			break
		}
		parts = append(parts, s[:i])
		s = strings.TrimLeftFunc(s[i:], isPySpace)
	}
	if s != "" {
		parts = append(parts, s)
	}
	return parts
}

func firstRune(s string) (rune, int) {
	for _, r := range s {
		return r, len(string(r))
	}
	return 0, 0
}

// splitMethod implements split/rsplit with Python's signature split(sep=None, maxsplit=-1).
func splitMethod(fromRight bool) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		var sepV, maxV *exec.Value
		if len(args.Args) > 0 {
			sepV = args.Args[0]
		}
		if len(args.Args) > 1 {
			maxV = args.Args[1]
		}
		if len(args.Args) > 2 {
			return nil, exec.ErrInvalidCall(fmt.Errorf("split() takes at most 2 arguments"))
		}
		for k, v := range args.KwArgs {
			switch k {
			case "sep":
				sepV = v
			case "maxsplit":
				maxV = v
			default:
				return nil, exec.ErrInvalidCall(fmt.Errorf("split() got an unexpected keyword argument %q", k))
			}
		}
		var sep *string
		if sepV != nil && !sepV.IsNil() {
			if !sepV.IsString() {
				return nil, exec.ErrInvalidCall(fmt.Errorf("must be str or None, not %s", sepV.String()))
			}
			s := sepV.String()
			sep = &s
		}
		maxsplit := -1
		if maxV != nil {
			if !maxV.IsInteger() {
				return nil, exec.ErrInvalidCall(fmt.Errorf("maxsplit must be an integer"))
			}
			maxsplit = maxV.Integer()
		}
		out, err := pySplit(self, sep, maxsplit, fromRight)
		if err != nil {
			return nil, exec.ErrInvalidCall(err)
		}
		return out, nil
	}
}

// replaceMethod is Python's str.replace(old, new, count=-1).
func replaceMethod(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
	if len(args.Args) < 2 || len(args.Args) > 3 || !args.Args[0].IsString() || !args.Args[1].IsString() {
		return nil, exec.ErrInvalidCall(fmt.Errorf("replace() takes (old: str, new: str, count: int = -1)"))
	}
	count := -1
	if len(args.Args) == 3 {
		if !args.Args[2].IsInteger() {
			return nil, exec.ErrInvalidCall(fmt.Errorf("replace() count must be an integer"))
		}
		count = args.Args[2].Integer()
	}
	return strings.Replace(self, args.Args[0].String(), args.Args[1].String(), count), nil
}
