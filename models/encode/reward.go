package encode

import (
	"errors"
	"fmt"
	"slices"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
)

// RewardTrainingIDs tokenizes a prompt and its answer as one sequence the way TRL's RewardTrainer
// does (_prepare_dataset, reward_trainer.py v0.24): the prompt (empty when implicit) is prepended
// to the answer; a conversation is rendered whole by the chat template, without a generation
// prompt (apply_chat_template); plain text gets the EOS appended unless it ends with it (add_eos)
// and is tokenized with the tokenizer's special tokens (its BOS, if any).
func (t *Text) RewardTrainingIDs(prompt, answer data.Text) ([]int32, error) {
	if prompt.Conversational() || answer.Conversational() {
		return t.rewardChat(prompt, answer)
	}
	text := prompt.String + answer.String
	if text == "" {
		return nil, errors.New("empty text")
	}
	ids, err := t.EncodeText(text, true)
	if err != nil {
		return nil, err
	}
	return int32s(ids), nil
}

// RewardInputIDs tokenizes a prompt and a generated completion for a reward model as TRL's
// GRPOTrainer._calculate_rewards does (grpo_trainer.py v0.24 L1033-1043), with the reward model's
// own text side t: a conversation (prompt messages plus the completion as the assistant's
// message) rendered by its chat template; plain text as prompt + completion, tokenized without
// special tokens and without an EOS (the completion's text has none: special tokens are skipped
// when it is decoded).
func (t *Text) RewardInputIDs(prompt data.Text, completion string) ([]int32, error) {
	if prompt.Conversational() {
		return t.rewardChat(prompt, data.Text{Messages: []chat.Message{{Role: "assistant", Content: completion}}})
	}
	ids := t.Tokenizer.Encode(prompt.String + completion)
	if len(ids) == 0 {
		return nil, errors.New("empty text")
	}
	return int32s(ids), nil
}

// rewardChat renders prompt and answer messages as one conversation with the chat template.
func (t *Text) rewardChat(prompt, answer data.Text) ([]int32, error) {
	if (prompt.String != "" && !prompt.Conversational()) || (answer.String != "" && !answer.Conversational()) {
		return nil, fmt.Errorf("a conversational prompt or answer cannot be joined with a plain-text one")
	}
	msgs := append(slices.Clip(prompt.Messages), answer.Messages...)
	if len(msgs) == 0 {
		return nil, errors.New("empty conversation")
	}
	ids, _, err := t.EncodeChat(msgs, nil)
	if err != nil {
		return nil, err
	}
	return int32s(ids), nil
}

// PadTokenID is the pad token a reward model reads its score before (model.config.pad_token_id)
// as TRL's RewardTrainer and GRPOTrainer set it: padToken when given, else the tokenizer's
// pad_token, else its eos_token.
func (t *Text) PadTokenID(padToken string) (int, error) {
	_, id, err := t.padToken(padToken)
	return id, err
}

// SetPadToken makes the pad token PadTokenID resolves the tokenizer's pad_token, as TRL v0.24's
// RewardTrainer sets processing_class.pad_token_id (reward_trainer.py: pad_token = args.pad_token or
// processing_class.pad_token or processing_class.eos_token), so that the saved tokenizer names it:
// SaveChanges writes it as tokenizer_config.json's and special_tokens_map.json's pad_token when it
// differs from the tokenizer's own (e.g. a tokenizer without one gets its eos_token). It returns
// the token's id.
func (t *Text) SetPadToken(padToken string) (int, error) {
	tok, id, err := t.padToken(padToken)
	if err != nil {
		return 0, err
	}
	if tok != t.Tokenizer.Config().PadToken {
		t.pad = tok
	}
	return id, nil
}

func (t *Text) padToken(padToken string) (string, int, error) {
	tok := padToken
	if tok == "" {
		tok = t.Tokenizer.Config().PadToken
	}
	if tok == "" {
		var err error
		if tok, _, err = t.EOS(); err != nil {
			return "", 0, fmt.Errorf("no pad_token: %w", err)
		}
	}
	id, ok := t.Tokenizer.TokenToID(tok)
	if !ok {
		return "", 0, fmt.Errorf("pad_token %q is not a token of the tokenizer", tok)
	}
	return tok, id, nil
}

func int32s(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
