// Regenerates golden.json: the merges HuggingFace's BpeTrainer learns on each corpus file here,
// with Qwen2's pipeline (NFC; Split with Qwen's regex, Isolated; ByteLevel without prefix space or
// regex) and the default trainer of tokenizer.train(files) (vocab_size 30000, min_frequency 0).
// It also loads demo/tokenizer.json (the demo tokenizer this package writes) into HuggingFace and
// records the ids it gives for every line of corpus_mixed.txt and a rendered demo conversation.
// Needs the npm package tokenizers (0.23.2 was used):
//   npm install tokenizers@0.23.2 && NODE_PATH=$PWD/node_modules node gen_golden.js > golden.json
const { Tokenizer } = require('tokenizers');
const fs = require('fs');
const crypto = require('crypto');
const path = require('path');

const regex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
const spec = {
  version: '1.0', truncation: null, padding: null, added_tokens: [],
  normalizer: { type: 'NFC' },
  pre_tokenizer: { type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false }, byteLevel] },
  post_processor: byteLevel, decoder: byteLevel,
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
    fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab: {}, merges: [] },
};

const corpora = {};
for (const name of ['corpus_demo.txt', 'corpus_mixed.txt']) {
  const file = path.join(__dirname, name);
  const tok = Tokenizer.fromString(JSON.stringify(spec));
  tok.train([file]);
  const tmp = path.join(require('os').tmpdir(), 'bpetrain-golden.json');
  tok.save(tmp, false);
  const merges = JSON.parse(fs.readFileSync(tmp, 'utf8')).model.merges
    .map((m) => (typeof m === 'string' ? m.split(' ') : m));
  const sha256 = crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
  corpora[name] = { sha256, merges };
}
async function encodeDemo() {
  const tok = Tokenizer.fromFile(path.join(__dirname, 'demo', 'tokenizer.json'));
  const texts = fs.readFileSync(path.join(__dirname, 'corpus_mixed.txt'), 'utf8').split('\n').filter((t) => t !== '');
  texts.push('<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' +
    '<|im_start|>user\n12×19는 얼마인가요? 숫자 하나로만 답하세요.<|im_end|>\n<|im_start|>assistant\n228<|im_end|>\n<|endoftext|>');
  const cases = [];
  for (const text of texts) {
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    cases.push({ text, ids: enc.getIds() });
  }
  return cases;
}

encodeDemo().then((demoEncode) => {
  const version = require('tokenizers/package.json').version;
  const meta = { generator: 'gen_golden.js', tokenizers: `npm tokenizers ${version}`, trainer: 'BpeTrainer default (vocab_size 30000, min_frequency 0)' };
  process.stdout.write(JSON.stringify({ meta, corpora, demo_encode: demoEncode }) + '\n');
});
