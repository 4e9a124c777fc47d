// HuggingFace tokenizers as the reference for data/tokenizer (see ../README.md).
// usage: node oracle.js TOKENIZER_JSON[.gz] IN.jsonl OUT.jsonl
// Each input line is {"text": s} or {"ids": [...]}; each output line is {"ids", "ids_plain",
// "ids_special", "decoded"} or {"decoded", "decoded_skip"}. ids_plain comes from the same file with
// "added_tokens" emptied; ids_special is encode(text, add_special_tokens=True) (the
// post-processor's BOS for Llama 3 and Gemma 3); decoded is decode(ids).
const { Tokenizer } = require('tokenizers');
const fs = require('fs');
const zlib = require('zlib');

const [, , tokPath, inPath, outPath] = process.argv;
let raw = fs.readFileSync(tokPath);
if (tokPath.endsWith('.gz')) raw = zlib.gunzipSync(raw);
const json = raw.toString('utf8');
const full = Tokenizer.fromString(json);
const doc = JSON.parse(json);
doc.added_tokens = [];
const plain = Tokenizer.fromString(JSON.stringify(doc));

(async () => {
  const lines = fs.readFileSync(inPath, 'utf8').split('\n').filter((l) => l.length > 0);
  const out = [];
  for (const line of lines) {
    const o = JSON.parse(line);
    if ('text' in o) {
      const a = await full.encode(o.text, null, { addSpecialTokens: false });
      const b = await plain.encode(o.text, null, { addSpecialTokens: false });
      const c = await full.encode(o.text, null, { addSpecialTokens: true });
      const decoded = await full.decode(a.getIds(), false);
      out.push(JSON.stringify({ ids: a.getIds(), ids_plain: b.getIds(), ids_special: c.getIds(), decoded }));
    } else {
      const decoded = await full.decode(o.ids, false);
      const decodedSkip = await full.decode(o.ids, true);
      out.push(JSON.stringify({ decoded, decoded_skip: decodedSkip }));
    }
  }
  fs.writeFileSync(outPath, out.join('\n') + '\n');
})();
