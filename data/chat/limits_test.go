package chat

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// renderSrc parses src and renders an empty conversation with it.
func renderSrc(t *testing.T, src string) (string, error) {
	t.Helper()
	tpl, err := Parse(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tpl.Render(nil, Options{})
}

// withLimits runs f with the render limits set to lim.
func withLimits(t *testing.T, lim renderLimits, f func()) {
	t.Helper()
	saved := limits
	limits = lim
	defer func() { limits = saved }()
	f()
}

func wantLimitError(t *testing.T, src, want string) {
	t.Helper()
	start := time.Now()
	out, err := renderSrc(t, src)
	if err == nil || err.Error() != want {
		t.Fatalf("%s: got error %v (output %d bytes), want %q", src, err, len(out), want)
	}
	if out != "" {
		t.Fatalf("%s: error came with output %q", src, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("%s: took %v", src, d)
	}
}

// TestRender_RecursiveMacroBounded: a macro without a base case fails at the default nesting
// limit instead of overflowing the goroutine stack (found by FuzzRender).
func TestRender_RecursiveMacroBounded(t *testing.T) {
	wantLimitError(t, `{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}`,
		`render chat template: macro "f" nested deeper than 256 calls (recursion without a base case?)`)
}

// TestRender_RecursiveMacroWithinBounds: a legitimately recursive macro (a nested JSON schema,
// 10 levels deep) renders.
func TestRender_RecursiveMacroWithinBounds(t *testing.T) {
	src := `{% macro schema(s) %}{% if s.type == "object" %}{ {% for k, v in s.properties.items() %}{{ k }}: {{ schema(v) }}; {% endfor %}}{% else %}{{ s.type }}{% endif %}{% endmacro %}` +
		`{{ schema(tools[0]) }}`
	tool := `{"type":"string"}`
	want := "string"
	for i := 0; i < 10; i++ {
		tool = `{"type":"object","properties":{"p":` + tool + `}}`
		want = "{ p: " + want + "; }"
	}
	tpl, err := Parse(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(nil, Options{Tools: []json.RawMessage{json.RawMessage(tool)}})
	if err != nil || got != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	// The nesting limit is the bound: 10 levels pass at 11 and fail at 10 (the first call counts).
	withLimits(t, renderLimits{depth: 10, steps: MaxRenderSteps, output: MaxRenderOutput, time: MaxRenderTime}, func() {
		if _, err := tpl.Render(nil, Options{Tools: []json.RawMessage{json.RawMessage(tool)}}); err == nil || !strings.Contains(err.Error(), "nested deeper than 10 calls") {
			t.Fatalf("at depth limit 10: got %v", err)
		}
	})
}

// TestRender_HugeRangeBounded: range() elements count against the step limit, for one huge
// range and for nested ranges with an empty body.
func TestRender_HugeRangeBounded(t *testing.T) {
	wantLimitError(t, `{% for i in range(1000000000000) %}x{% endfor %}`,
		`render chat template: range(1000000000000): more than 100000 macro calls and range() elements in all (an endless or huge loop, or recursion that fans out?)`)
	wantLimitError(t, `{% for i in range(1000) %}{% for j in range(0, 1000000, 3) %}{% endfor %}{% endfor %}`,
		`render chat template: range(0, 1000000, 3): more than 100000 macro calls and range() elements in all (an endless or huge loop, or recursion that fans out?)`)
	withLimits(t, renderLimits{depth: MaxMacroDepth, steps: 1000, output: MaxRenderOutput, time: MaxRenderTime}, func() {
		wantLimitError(t, `{% for i in range(40) %}{% for j in range(40) %}{% endfor %}{% endfor %}`,
			`render chat template: range(40): more than 1000 macro calls and range() elements in all (an endless or huge loop, or recursion that fans out?)`)
		// Within the limit, range() is gonja's.
		if out, err := renderSrc(t, `{% for i in range(10, 0, -3) %}{{ i }},{% endfor %}{{ range(3)|list }}`); err != nil || out != "10,7,4,1,[0, 1, 2]" {
			t.Fatalf("got %q, %v", out, err)
		}
	})
}

// TestRender_MacroFanOutBounded: a macro that calls itself twice per level, with a base case,
// makes 2^41 calls; the step limit stops it.
func TestRender_MacroFanOutBounded(t *testing.T) {
	withLimits(t, renderLimits{depth: MaxMacroDepth, steps: 10000, output: MaxRenderOutput, time: MaxRenderTime}, func() {
		wantLimitError(t, `{% macro f(n) %}{% if n > 0 %}{{ f(n-1) ~ f(n-1) }}{% else %}x{% endif %}{% endmacro %}{{ f(40) }}`,
			`render chat template: macro "f": more than 10000 macro calls and range() elements in all (an endless or huge loop, or recursion that fans out?)`)
	})
	withLimits(t, renderLimits{depth: MaxMacroDepth, steps: MaxRenderSteps, output: 1000, time: MaxRenderTime}, func() {
		wantLimitError(t, `{% macro f(n) %}{% if n > 0 %}{{ f(n-1) ~ f(n-1) }}{% else %}x{% endif %}{% endmacro %}{% set s = f(10) %}`,
			`render chat template: macro "f" returned more than 1000 bytes (recursion that fans out?)`)
	})
}

// TestRender_HugeOutputBounded: the rendered text may not pass the output limit.
func TestRender_HugeOutputBounded(t *testing.T) {
	withLimits(t, renderLimits{depth: MaxMacroDepth, steps: MaxRenderSteps, output: 1000, time: MaxRenderTime}, func() {
		wantLimitError(t, `{% for i in range(200) %}hello{% endfor %}x`,
			`render chat template: output longer than 1000 bytes (an endless or huge loop?)`)
		wantLimitError(t, `{{ "x" * 1001 }}`,
			`render chat template: output longer than 1000 bytes (an endless or huge loop?)`)
		if out, err := renderSrc(t, `{{ "x" * 1000 }}`); err != nil || len(out) != 1000 {
			t.Fatalf("got %d bytes, %v", len(out), err)
		}
	})
}

// TestRender_TimeBounded: a render past the time limit returns an error; the abandoned render
// stops at its next range().
func TestRender_TimeBounded(t *testing.T) {
	withLimits(t, renderLimits{depth: MaxMacroDepth, steps: MaxRenderSteps, output: MaxRenderOutput, time: time.Millisecond}, func() {
		wantLimitError(t, `{% for i in range(90000) %}{{ i }}{% endfor %}`,
			`render chat template: took longer than 1ms (an endless or huge loop?)`)
	})
}

// TestParse_SelfReferenceRefused: a template that extends, includes or imports itself gets an
// error instead of recursing without end.
func TestParse_SelfReferenceRefused(t *testing.T) {
	if _, err := Parse(`{% extends "chat_template" %}`, nil); err == nil || !strings.Contains(err.Error(), "chat templates cannot include other files (chat_template)") {
		t.Fatalf("extends: got %v", err)
	}
	for _, src := range []string{`{% include "chat_template" %}`, `{% import "chat_template" as m %}`, `{% from "chat_template" import f %}`} {
		if _, err := renderSrc(t, src); err == nil || !strings.Contains(err.Error(), "chat templates cannot include other files (chat_template)") {
			t.Fatalf("%s: got %v", src, err)
		}
	}
}
