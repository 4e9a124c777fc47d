package chat

import (
	"strings"
	"testing"
)

// Conditionals inside brackets, which gonja cannot parse, rewritten by rewriteNestedIfs: the
// renderings are Python jinja2 3.1.6's (transformers' renderer) for c, d in (true, true), (true,
// false), (false, true), (false, false), with x="X", y="Y", ms=["a", "b"], u=None; "ERROR" is
// an error (jinja2: 'None' has no attribute 'v'), which Jinja raises only for the branch taken.
func TestRewriteNestedIfs(t *testing.T) {
	cases := []struct {
		src  string
		want [4]string
	}{
		{`{{ 'a' + (x if c else y) + 'b' }}`, [4]string{"aXb", "aXb", "aYb", "aYb"}},
		{`{{ (x if c else (y if d else 'z')) }}`, [4]string{"X", "X", "Y", "z"}},
		{`{{ (x if c else y if d else 'z') }}`, [4]string{"X", "X", "Y", "z"}},
		{`{{ 'a,b;c'.split(',' if c else ';') | join('+') }}`, [4]string{"a+b;c", "a+b;c", "a,b+c", "a,b+c"}},
		{`{{ none | default(x if c else y, true) }}`, [4]string{"X", "X", "Y", "Y"}},
		{`{{ (u.v.w if c else 'safe') }}|{{ ('safe' if not c else u.v.w) }}`, [4]string{"ERROR", "ERROR", "safe|safe", "safe|safe"}},
		{`{{ ('' if c else 'no') }}|{{ ([] if c else [1]) | length }}`, [4]string{"|0", "|0", "no|1", "no|1"}},
		{`{% if (x if c else '') %}T{% else %}F{% endif %}`, [4]string{"T", "T", "F", "F"}},
		{`{{ "(x if c else y)" }}`, [4]string{"(x if c else y)", "(x if c else y)", "(x if c else y)", "(x if c else y)"}},
		{`{{ {'k': (1 if c else 2)}['k'] }}{{ {'k': 1 if c else 2}['k'] }}`, [4]string{"11", "11", "22", "22"}},
		{`{{ 'abc'[1 if c else 0:] }}`, [4]string{"bc", "bc", "abc", "abc"}},
		{`{%- for m in (ms if c else ms[:1]) -%}{{ m }}{%- endfor %}`, [4]string{"ab", "ab", "a", "a"}},
		{`{{ ((x if c else y) ~ '!') }}`, [4]string{"X!", "X!", "Y!", "Y!"}},
		{`{{ 'p' ~ (x|lower if c else y|lower) ~ 'q' }}`, [4]string{"pxq", "pxq", "pyq", "pyq"}},
	}
	for _, tc := range cases {
		tpl, err := Parse(tc.src, nil)
		if err != nil {
			t.Errorf("Parse(%s): %v", tc.src, err)
			continue
		}
		for k, cd := range [][2]bool{{true, true}, {true, false}, {false, true}, {false, false}} {
			vars := map[string]any{"x": "X", "y": "Y", "c": cd[0], "d": cd[1], "ms": []any{"a", "b"}, "u": nil}
			got, err := tpl.Render(nil, Options{Vars: vars})
			if tc.want[k] == "ERROR" {
				if err == nil {
					t.Errorf("%s c=%v d=%v: got %q, want an error", tc.src, cd[0], cd[1], got)
				}
				continue
			}
			if err != nil || got != tc.want[k] {
				t.Errorf("%s c=%v d=%v: got %q (err %v), want %q", tc.src, cd[0], cd[1], got, err, tc.want[k])
			}
		}
	}
	// A template without a nested conditional reaches gonja unchanged.
	for _, src := range []string{"{{ x if c else y }}", "{%- set a = (b) -%}{{ (a) }}\r\n", "{{ 'if (a) else' }}"} {
		if got, err := rewriteNestedIfs(src, newConfig()); err != nil || got != src {
			t.Errorf("rewriteNestedIfs(%q) = %q, %v; want it unchanged", src, got, err)
		}
	}
	if _, err := Parse("{{ (x if c) }}", nil); err == nil || !strings.Contains(err.Error(), "conditional without else inside brackets") {
		t.Errorf("(x if c): err %v", err)
	}
}
