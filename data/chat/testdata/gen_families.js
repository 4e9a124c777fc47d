// Renders convs_families.json with the chat templates of data/tokenizer/testdata/{llama3,gemma3}
// through @huggingface/jinja and compares with hf_families.json (written by transformers'
// apply_chat_template, scripts/reference/tokenizer_goldens.py): a second renderer as a cross-check.
// usage (from data/chat/testdata): (cd jinja-oracle && npm install) && node gen_families.js
const fs = require('fs');
const path = require('path');
const { Template } = require('./jinja-oracle/node_modules/@huggingface/jinja');

const convs = JSON.parse(fs.readFileSync('convs_families.json', 'utf8'));
const tokenField = (v) => (v == null ? null : typeof v === 'string' ? v : v.content);
const out = [];
for (const family of ['llama3', 'gemma3']) {
  const cfg = JSON.parse(fs.readFileSync(path.join('..', '..', 'tokenizer', 'testdata', family, 'tokenizer_config.json'), 'utf8'));
  const tpl = new Template(cfg.chat_template);
  const special = {};
  for (const k of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
    const v = tokenField(cfg[k]);
    if (v != null) special[k] = v;
  }
  for (const conv of convs) {
    for (const gen of [true, false]) {
      let rendered = null;
      let error = null;
      try {
        rendered = tpl.render({ messages: conv.messages, add_generation_prompt: gen, ...special });
      } catch (e) {
        error = String(e.message || e);
      }
      out.push({ family, name: conv.name, add_generation_prompt: gen, rendered, error });
    }
  }
}
const golden = JSON.parse(fs.readFileSync('hf_families.json', 'utf8'));
let differ = golden.length === out.length ? 0 : 1;
out.forEach((o, i) => {
  const g = golden[i] || {};
  if (g.family !== o.family || g.name !== o.name || g.add_generation_prompt !== o.add_generation_prompt ||
      g.rendered !== o.rendered || (g.error === null) !== (o.error === null)) {
    differ++;
    console.log(`differs: ${o.family} ${o.name} add_generation_prompt=${o.add_generation_prompt}`);
  }
});
console.log(`@huggingface/jinja: ${out.length - differ} of ${out.length} renderings as hf_families.json`);
process.exit(differ ? 1 : 0);
