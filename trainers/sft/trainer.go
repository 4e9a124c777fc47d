package sft

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/step"
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Trainer is SFT as a loop.Method: TRL's SFTTrainer on language-modelling ("text" or "messages")
// or prompt-completion data, the loss NLLOverTokens (loss_type nll) or DFTOverTokens (dft) over
// the scored tokens of the whole accumulated batch.
type Trainer struct {
	model    *trainable.Model
	examples *exampleStore // tokenized rows, or packed rows when rowLen > 0
	rowLen   int           // packing: the length of a packed row (max_length); 0 = no packing
	loss     func(logps, mask, numTokens *Node) *Node
	unscored string // what Warnings says about rows with no scored token; "" = none
	inMemory string // what Warnings says when the examples could not go to a mapped file
	// countFirst: the batches are not padding-free, so HF's num_items_in_batch counts a row's first
	// token when it carries a label (Items).
	countFirst bool
}

// losses maps SFTConfig's loss_type to its loss (loss.go).
var losses = map[string]func(logps, mask, numTokens *Node) *Node{"nll": NLLOverTokens, "dft": DFTOverTokens}

// example is one tokenized row (ids truncated to max_length), or one packed row of several.
type example struct {
	ids    []int32
	scored []bool  // scored[t]: ids[t] counts in the loss (never t = 0, nor a segment's first token)
	seg    []int32 // packed rows: the segment (1, 2, …) of each token; nil unpacked
	first  bool    // the loss mask of ids[0] as tokenized (wrapped packing scores it after another example)
	units  int
}

// New tokenizes d for SFT as TRL does:
//   - prompt-completion: loss on the completion tokens only unless completion_only_loss is false;
//   - language modelling: "messages" rows train on the assistant turns only (their content and
//     closing end-of-turn token, from data/chat's spans) unless assistant_only_loss is false;
//     "text" rows and messages with assistant_only_loss=false train on every token. TRL v0.24
//     defaults assistant_only_loss to False (every token); completion-only is the default here
//     because training on the system and user turns is rarely what a chat SFT run wants;
//     --assistant-only-loss=false restores TRL's behaviour;
//   - conversational rows are rendered with the model's chat template; standard rows get EOS
//     appended (unless already there); rows are truncated to max_length (keeping the start);
//   - packing: the examples are packed into rows of max_length tokens (pack.go), bfd (each
//     example cut to max_length, attention within it) or wrapped (not cut, attention across).
//
// A row that cannot be used is an error naming its file and line.
func New(m *trainable.Model, d *data.Dataset, cfg *Config) (*Trainer, error) {
	if d.Format != data.LanguageModeling && d.Format != data.PromptCompletion {
		return nil, fmt.Errorf("%s: sft needs language_modeling (text/messages) or prompt_completion rows, got %s", d.Path, d.Format)
	}
	messages := d.Format == data.LanguageModeling && d.Conversational
	assistantOnly := messages
	if cfg.AssistantOnlyLoss != nil {
		assistantOnly = *cfg.AssistantOnlyLoss
	}
	if assistantOnly && !messages {
		return nil, fmt.Errorf("%s: assistant_only_loss needs conversational \"messages\" rows", d.Path)
	}
	loss, ok := losses[cfg.LossType]
	if !ok {
		return nil, fmt.Errorf("loss_type must be one of nll, dft, got %q", cfg.LossType)
	}
	if err := checkTextField(d, cfg); err != nil {
		return nil, err
	}
	if err := configureTokenizer(m, cfg); err != nil {
		return nil, err
	}
	// TRL: padding_free = args.padding_free or (packing and packing_strategy == "bfd"); only then
	// does the collator set the labels at position_ids == 0 to −100.
	t := &Trainer{model: m, loss: loss, countFirst: !(cfg.PaddingFree || (cfg.Packing && cfg.PackingStrategy != "wrapped"))}
	if assistantOnly && m.Text.Template == nil {
		return nil, fmt.Errorf("%s: conversational data needs a chat template, and %s has none (set chat_template_path)", d.Path, m.Dir)
	}
	// Conversational rows not trained assistant-only are rendered with the chat template, row by
	// row as they come (TRL's maybe_apply_chat_template; data.ApplyChatTemplateRow).
	render := d.Conversational && !assistantOnly
	if render && m.Text.Template == nil {
		return nil, fmt.Errorf("%s: conversational data needs a chat template, and %s has none", d.Path, m.Text.Dir)
	}
	// TRL v0.24's add_eos appends EOS to the literal "text" column only (and to completions), so
	// text rows read from another dataset_text_field get none; rendered conversations end with the
	// template's own end-of-turn token.
	addEOS := !d.Conversational && (d.Format == data.PromptCompletion || textField(d) == data.DefaultTextField)
	completionOnly := cfg.CompletionOnlyLoss == nil || *cfg.CompletionOnlyLoss
	wrapped := cfg.Packing && cfg.PackingStrategy == "wrapped"
	if cfg.Packing && cfg.MaxLength < 1 {
		return nil, fmt.Errorf("packing needs max_length ≥ 1 (the length of a packed row), got %d", cfg.MaxLength)
	}
	store, err := newExampleStore(false)
	if err != nil { // no file in $TMPDIR: the examples stay on the heap, and the run says so
		t.inMemory = fmt.Sprintf("%v; the tokenized examples are held in memory (set TMPDIR to a writable directory)", err)
		store, _ = newExampleStore(true)
	}
	t.examples = store
	defer store.discard() // the files of a store not mapped (an error below); nothing once mapped
	// Packing works on blocks of mapBatch examples (pack.go), each packed as it fills.
	var block []example
	pack := func() error {
		packed := packBFD
		if wrapped {
			packed = packWrapped
		}
		for _, row := range packed(block, cfg.MaxLength) {
			if err := store.add(row); err != nil {
				return err
			}
		}
		block = block[:0]
		return nil
	}
	var unscored unscoredRows
	err = d.Each(func(r data.Row) error {
		if render {
			var err error
			if r, err = data.ApplyChatTemplateRow(m.Text.Template, d, r, chat.Options{}); err != nil {
				return err
			}
		}
		ex, err := t.tokenize(d.Format, r, addEOS, completionOnly, assistantOnly)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", d.Path, r.Line, err)
		}
		untruncated := countScored(ex.scored[1:])
		if cfg.MaxLength > 0 && len(ex.ids) > cfg.MaxLength && !wrapped {
			ex.ids, ex.scored = ex.ids[:cfg.MaxLength], ex.scored[:cfg.MaxLength]
		}
		ex.first, ex.scored[0] = ex.scored[0], false
		ex.units = countScored(ex.scored)
		if ex.units == 0 && !(wrapped && ex.first) {
			unscored.add(r.Line, untruncated > 0)
		}
		if cfg.Packing {
			block = append(block, ex)
			if len(block) == mapBatch {
				err = pack()
			}
		} else {
			err = store.add(ex)
		}
		if err != nil {
			return fmt.Errorf("sft: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(block) > 0 {
		if err := pack(); err != nil {
			return nil, fmt.Errorf("sft: %w", err)
		}
	}
	if unscored.n > 0 {
		t.unscored = unscored.describe(d.Path, d.Len(), cfg.MaxLength, assistantOnly, completionOnly && d.Format == data.PromptCompletion)
		if unscored.n == d.Len() {
			return nil, fmt.Errorf("%s", t.unscored)
		}
	}
	if cfg.Packing {
		t.rowLen = cfg.MaxLength
	}
	if err := store.finish(); err != nil {
		return nil, err
	}
	return t, nil
}

// configureTokenizer applies SFTConfig's eos_token, then chat_template_path, to the model's
// tokenizer (models/encode), in the order of TRL v0.24's SFTTrainer.__init__ (a cloned template's
// eos_token wins), before the data is prepared; the model's Save writes them out. Idempotent: the
// eval set's New calls it again on the same model.
func configureTokenizer(m *trainable.Model, cfg *Config) error {
	if cfg.EOSToken != "" {
		if err := m.Text.SetEOSToken(cfg.EOSToken); err != nil {
			return err
		}
	}
	if cfg.ChatTemplatePath != "" {
		return m.Text.SetChatTemplate(cfg.ChatTemplatePath)
	}
	return nil
}

// textField is the column d's language-modelling rows were read from ("" = "text").
func textField(d *data.Dataset) string {
	if d.TextField == "" {
		return data.DefaultTextField
	}
	return d.TextField
}

// checkTextField requires standard language-modelling rows to have been read from the column
// dataset_text_field names (data.ReadFileWith with ReadOptions.TextField).
func checkTextField(d *data.Dataset, cfg *Config) error {
	want := cfg.DatasetTextField
	if want == "" {
		want = data.DefaultTextField
	}
	if d.Format != data.LanguageModeling || d.Conversational || textField(d) == want {
		return nil
	}
	return fmt.Errorf("%s: dataset_text_field is %q but the rows were read from %q (read the file with data.ReadFileWith and ReadOptions{TextField: %q})",
		d.Path, want, textField(d), want)
}

// tokenize encodes one row with the model's text side (models/encode): a conversation with the
// chat template and its assistant tokens scored, a text whole, a prompt and completion jointly
// (completion-only: the completion's tokens scored).
func (t *Trainer) tokenize(f data.Format, r data.Row, addEOS, completionOnly, assistantOnly bool) (example, error) {
	txt := t.model.Text
	// A tokenizer without a usable eos_token is refused on every row, also where none is appended.
	if _, _, err := txt.EOS(); err != nil {
		return example{}, err
	}
	if assistantOnly {
		ids, mask, err := txt.EncodeChat(r.Text.Messages, r.Tools)
		if err != nil {
			return example{}, err
		}
		return example{ids: int32s(ids), scored: mask}, nil
	}
	if f == data.LanguageModeling {
		ids, err := txt.EncodeText(r.Text.String, addEOS)
		if err != nil {
			return example{}, err
		}
		return example{ids: int32s(ids), scored: trues(len(ids))}, nil
	}
	ids, start, err := txt.EncodeJoined(r.Prompt.String, r.Completion.String, addEOS)
	if err != nil {
		return example{}, err
	}
	scored := trues(len(ids))
	if completionOnly {
		clear(scored[:start])
	}
	return example{ids: int32s(ids), scored: scored}, nil
}

func countScored(scored []bool) int {
	n := 0
	for _, s := range scored {
		if s {
			n++
		}
	}
	return n
}

// unscoredRows counts the rows with no scored token (nothing in them trains) and why.
type unscoredRows struct {
	n, truncated int // rows; of them, rows whose scored tokens max_length cut away
	firstLine    int // the file line of the first
}

func (u *unscoredRows) add(line int, truncated bool) {
	if u.n == 0 {
		u.firstLine = line
	}
	u.n++
	if truncated {
		u.truncated++
	}
}

// describe says how many of the rows have no token to train on and why (the first such row's line).
func (u unscoredRows) describe(path string, rows, maxLength int, assistantOnly, completionOnly bool) string {
	var why []string
	if u.truncated > 0 {
		why = append(why, fmt.Sprintf("%d lose all their scored tokens to max_length %d (raise --max-length)", u.truncated, maxLength))
	}
	if none := u.n - u.truncated; none > 0 {
		cause := "a text of one token: nothing predicts it"
		switch {
		case assistantOnly:
			cause = "no assistant turn or only empty ones; --assistant-only-loss=false trains on every token"
		case completionOnly:
			cause = "an empty completion; --completion-only-loss=false trains on the prompt too"
		}
		why = append(why, fmt.Sprintf("%d have none (%s)", none, cause))
	}
	what := fmt.Sprintf("%d of the %d rows have no token to train on (no scored token; they still count in num_tokens)", u.n, rows)
	if u.n == rows {
		what = fmt.Sprintf("none of the %d rows has a token to train on (a scored token)", rows)
	}
	return fmt.Sprintf("%s:%d: %s: %s", path, u.firstLine, what, strings.Join(why, "; "))
}

// Warnings implements loop.Warner: the rows with no token to train on, when some are (they still
// count in num_tokens, as TRL, which drops nothing).
func (t *Trainer) Warnings() []string {
	var w []string
	for _, s := range []string{t.unscored, t.inMemory} {
		if s != "" {
			w = append(w, s)
		}
	}
	return w
}

func int32s(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

func trues(n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = true
	}
	return out
}

// NumExamples implements loop.Method.
func (t *Trainer) NumExamples() int { return t.examples.len() }

// Units implements loop.Method: the example's scored tokens (eval_loss's per-batch divisor).
func (t *Trainer) Units(i int) float64 { return float64(t.examples.at(i).units) }

// Items implements loop.Itemizer: the example's share of TRL's num_items_in_batch, which the
// training loss is divided by. HF's Trainer counts the labels ≠ −100 before the shift
// (get_batch_samples: batch["labels"].ne(-100)), so a row whose first token carries a label (every
// token scored: text rows, completion_only_loss false) counts it although nothing predicts it,
// unless the batch is padding-free (bfd packing or padding_free), where the collator sets the
// labels at position 0 to −100. Prompt-completion rows with completion-only loss never count it.
func (t *Trainer) Items(i int) float64 {
	ex := t.examples.at(i)
	if t.countFirst && ex.first {
		return float64(ex.units + 1)
	}
	return float64(ex.units)
}

// Tokens implements loop.Method.
func (t *Trainer) Tokens(i int) int { return len(t.examples.at(i).ids) }

// Batch implements loop.Method: trainable.RowInputs (ids, pos, mask, loss mask [B,T], right-padded to
// a bucket); packed rows: packedInputs (ids, pos, segment ids, loss mask [B,max_length]).
func (t *Trainer) Batch(idx []int) (named.Feed, error) {
	if t.rowLen > 0 {
		rows := make([]example, len(idx))
		for k, i := range idx {
			rows[k] = t.examples.at(i)
		}
		return packedBatch(rows, t.rowLen), nil
	}
	rows, scored := make([][]int32, len(idx)), make([][]bool, len(idx))
	for k, i := range idx {
		ex := t.examples.at(i)
		rows[k], scored[k] = ex.ids, ex.scored
	}
	return trainable.PadRowsMasked(rows, scored, trainable.Bucket(trainable.MaxLen(rows))).Inputs(), nil
}

// Finish implements loop.Finisher: TRL's means over the micro-batches and the cumulative
// num_tokens.
func (t *Trainer) Finish(w loop.Window) map[string]float64 {
	return map[string]float64{
		"mean_token_accuracy": w.Mean("mean_token_accuracy"),
		"entropy":             w.Mean("entropy"),
		"num_tokens":          float64(w.TokensSeen),
	}
}

// Loss implements loop.Method: the loss_type's loss (NLLOverTokens or DFTOverTokens) of (lp, loss
// mask, norm), plus TRL's mean_token_accuracy over the scored tokens and entropy over every real
// token (the same for both loss types, as TRL). TRL v0.24's compute_loss takes the entropy of
// every position's logits, prompt and last token included, averaged over the attention mask
// (padding-free packed batches: over the whole flattened row, the real tokens); its accuracy
// compares the shifted logits with the labels ≠ −100.
func (t *Trainer) Loss(ctx *context.Context, in named.Inputs, norm *Node) (*Node, map[string]*Node) {
	h, ids, scored, attended := t.hidden(ctx, in)
	lp, correct, entropy := HeadStats(ctx, t.model.Config, h, ids)
	loss := t.loss(lp, scored, norm)
	return loss, map[string]*Node{
		"mean_token_accuracy": MeanTokenAccuracy(correct, scored),
		"entropy":             StopGradient(tokenmask.TokenMean(entropy, attended)),
	}
}

// hidden runs the decoder on a batch's inputs (Batch's: padded rows attend causally to their real
// tokens, packed rows within each segment) and returns the hidden states with the ids, the loss
// mask and the real-token mask (the attention mask; packed rows: segment ≠ 0).
func (t *Trainer) hidden(ctx *context.Context, in named.Inputs) (h, ids, scored, attended *Node) {
	if t.rowLen > 0 {
		p := named.Bind[packedInputs[*Node]](in)
		return decoder.HiddenSegments(ctx, t.model.Config, p.IDs, p.Pos, p.Segments), p.IDs, p.Loss, p.Segments
	}
	r := named.Bind[trainable.RowInputs[*Node]](in)
	return decoder.Hidden(ctx, t.model.Config, r.IDs, r.Pos, r.Mask), r.IDs, r.Loss, r.Mask
}

// NLL returns the mean negative log-likelihood over the scored tokens of every example (e.g. a
// held-out set), computed in micro-batches of batch rows with the model's current weights.
func (t *Trainer) NLL(backend backends.Backend, batch int) (float64, error) {
	sums, counts, err := t.BatchNLL(backend, batch)
	if err != nil {
		return 0, err
	}
	sum, count := 0.0, 0.0
	for i := range sums {
		sum, count = sum+sums[i], count+counts[i]
	}
	return sum / max(count, 1), nil
}

// BatchNLL returns, for each micro-batch of batch rows in example order, the summed negative
// log-likelihood of its scored tokens and their number, with the model's current weights.
func (t *Trainer) BatchNLL(backend backends.Backend, batch int) (sums, counts []float64, err error) {
	cfg := t.model.Config
	ev, err := step.NewContextEval(backend, t.model.Ctx.Reuse(), func(ctx *context.Context, in named.Inputs) map[string]*Node {
		h, ids, scored, _ := t.hidden(ctx, in)
		lp := decoder.TargetLogProbs(ctx, cfg, h, ids)
		m := ConvertDType(scored, lp.DType())
		return map[string]*Node{"sum": ConvertDType(ReduceAllSum(Mul(lp, m)), dtypes.Float64),
			"count": ConvertDType(ReduceAllSum(m), dtypes.Float64)}
	})
	if err != nil {
		return nil, nil, err
	}
	for lo := 0; lo < t.examples.len(); lo += batch {
		idx := make([]int, 0, batch)
		for i := lo; i < min(lo+batch, t.examples.len()); i++ {
			idx = append(idx, i)
		}
		in, _ := t.Batch(idx)
		outs, err := ev.Run(in)
		if err != nil {
			return nil, nil, err
		}
		sums, counts = append(sums, -step.ScalarValue(outs["sum"])), append(counts, step.ScalarValue(outs["count"]))
	}
	return sums, counts, nil
}
