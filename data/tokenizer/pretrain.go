package tokenizer

// What a BPE trainer (data/bpetrain) needs to learn merges that this package then applies exactly:
// the same pre-tokenizer, the same ByteLevel alphabet and the regex that tokenizer.json names.

// QwenPattern is the regex of the Split pre-tokenizer that FromJSON accepts (Qwen2/2.5/3's).
const QwenPattern = qwenPattern

// SplitWords calls emit for each word of normalized text s as the pre-tokenizer cuts it (Split
// with QwenPattern, behavior Isolated); the words cover s exactly, in order.
func SplitWords(s string, emit func(word string)) { splitWords(s, emit) }

// ByteLevel returns the ByteLevel spelling of raw bytes, one rune per byte, as vocabularies store
// tokens ("Ġ" for a space).
func ByteLevel(raw string) string { return byteLevelString(raw) }
