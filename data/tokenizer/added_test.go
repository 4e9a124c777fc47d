package tokenizer

import (
	"slices"
	"testing"
)

type seg struct {
	text string
	id   int // -1: plain text
}

func splitSegs(m *addedMatcher, s string) []seg {
	var out []seg
	for _, g := range m.split(s, nil) {
		out = append(out, seg{g.text, g.id})
	}
	return out
}

// The cases of HuggingFace's added_vocabulary.rs tests (without their Lowercase normalizer).
func TestAddedMatcher_Options(t *testing.T) {
	mask := func(o AddedToken) []AddedToken { o.ID, o.Content = 0, "<mask>"; return []AddedToken{o} }
	tests := []struct {
		name   string
		tokens []AddedToken
		in     string
		want   []seg
	}{
		{"plain", []AddedToken{{ID: 1, Content: "[CLS]"}, {ID: 2, Content: "[SEP]"}, {ID: 3, Content: "name"}},
			"[CLS] My name is Anthony [SEP]",
			[]seg{{"[CLS]", 1}, {" My ", -1}, {"name", 3}, {" is Anthony ", -1}, {"[SEP]", 2}}},
		{"longest wins", []AddedToken{{ID: 1, Content: "<a>"}, {ID: 2, Content: "<a><b>"}},
			"x<a><b><a>", []seg{{"x", -1}, {"<a><b>", 2}, {"<a>", 1}}},
		{"single word", mask(AddedToken{SingleWord: true}),
			"<mask> My name <mask> A<mask> <mask>ony <mask>",
			[]seg{{"<mask>", 0}, {" My name ", -1}, {"<mask>", 0}, {" A<mask> <mask>ony ", -1}, {"<mask>", 0}}},
		{"single word unicode", mask(AddedToken{SingleWord: true}),
			"<mask>, <mask>- ◌̰<mask>",
			[]seg{{"<mask>", 0}, {", ", -1}, {"<mask>", 0}, {"- ◌̰<mask>", -1}}},
		{"lstrip rstrip", mask(AddedToken{SingleWord: true, LStrip: true, RStrip: true}),
			"Hi <mask> there\t<mask>\t<mask>\u2000",
			[]seg{{"Hi", -1}, {" <mask> ", 0}, {"there", -1}, {"\t<mask>\t", 0}, {"<mask>\u2000", 0}}},
	}
	for _, tt := range tests {
		if got := splitSegs(newAddedMatcher(tt.tokens), tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("%s: split(%q)\n got %+v\nwant %+v", tt.name, tt.in, got, tt.want)
		}
	}
}

// normalized=true tokens match the NFC text; normalized=false tokens match the raw text only.
func TestEncode_NormalizedAddedTokens(t *testing.T) {
	added := []AddedToken{
		{ID: 260, Content: "ắ", Normalized: true},        // composed U+1EAF
		{ID: 261, Content: "n\u0303", Normalized: false}, // decomposed ñ
	}
	tok, err := FromJSON(tinyJSON(t, added, nil), "tiny.json")
	if err != nil {
		t.Fatal(err)
	}
	// "a\u0306\u0301" normalizes to "ắ" and then matches 260; "ñ" (composed) never matches 261 because
	// 261 is looked up before normalization.
	got := tok.Encode("a\u0306\u0301n\u0303ñ")
	want := []int{260, 261, 0xC3, 0xB1}
	for i, b := range want[2:] {
		want[2+i] = int(tok.model.byteIDs[b])
	}
	if !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}
