package chat

import "testing"

// BenchmarkRender_Qwen3 renders a three-turn conversation with Qwen3's template.
func BenchmarkRender_Qwen3(b *testing.B) {
	tpl, err := Load("testdata")
	if err != nil {
		b.Fatal(err)
	}
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "3×4?"},
		{Role: "assistant", Content: "12"}, {Role: "user", Content: "5×6?"}, {Role: "assistant", Content: "30"}}
	for b.Loop() {
		if _, err := tpl.Render(msgs, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAssistantSpans_Qwen3 is the same conversation with its assistant spans (three renders).
func BenchmarkAssistantSpans_Qwen3(b *testing.B) {
	tpl, err := Load("testdata")
	if err != nil {
		b.Fatal(err)
	}
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "3×4?"},
		{Role: "assistant", Content: "12"}, {Role: "user", Content: "5×6?"}, {Role: "assistant", Content: "30"}}
	for b.Loop() {
		if _, _, err := tpl.AssistantSpans(msgs, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
