// Session files (pi's JSONL trees, which OpenClaw reads too): each case writes a session through
// @mariozechner/pi-coding-agent's SessionManager the way a crash, a retry or a cut-off stream
// leaves it, shows that the context pi builds from it is broken, runs `tmend fix --in-place` on
// the file and loads it back through SessionManager.
//
// "The request" is what pi-ai's Anthropic provider would send for that context
// (streamAnthropic's onPayload sees it; throwing there stops the call before any fetch): pi-ai
// patches a call with no result at request time ("No result provided"), so the stored messages
// are also checked as they are, with `tmend check --dialect openclaw`.
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { SessionManager, convertToLlm } from '@mariozechner/pi-coding-agent';
import { getModel } from '@mariozechner/pi-ai';
import { streamAnthropic } from '@mariozechner/pi-ai/anthropic';
import { streamOpenAIResponses } from '@mariozechner/pi-ai/openai-responses';

const MODEL = getModel('anthropic', 'claude-sonnet-4-5');
const RESPONSES = getModel('openai', 'gpt-5');
const usage = { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
let clock = Date.UTC(2026, 0, 10, 9);
const user = (text) => ({ role: 'user', content: text, timestamp: clock++ });
const assistant = (content, stopReason = 'toolUse') => ({
  role: 'assistant', content, api: 'anthropic-messages', provider: 'anthropic', model: MODEL.id, usage, stopReason, timestamp: clock++,
});
const call = (id, command = 'ls') => ({ type: 'toolCall', ...(id ? { id } : {}), name: 'bash', arguments: { command } });
const text = (t) => ({ type: 'text', text: t });
const result = (toolCallId, out) => ({ role: 'toolResult', toolCallId, toolName: 'bash', content: [text(out)], isError: false, timestamp: clock++ });

// Each build writes a session through sm; the file must come out broken.
const BREAKS = {
  'missing result at the end (crash while the tool ran)': (sm) => {
    sm.appendMessage(user('list my files'));
    sm.appendMessage(assistant([text('Listing.'), call('toolu_01')]));
    // Just written: the tool may still run, so tmend leaves it alone unless forced.
    return { pendingFirst: true };
  },
  'missing result mid-session': (sm) => {
    sm.appendMessage(user('list my files'));
    sm.appendMessage(assistant([call('toolu_01'), call('toolu_02', 'pwd')]));
    sm.appendMessage(result('toolu_01', 'a.txt'));
    sm.appendMessage(user('and now?'));
    sm.appendMessage(assistant([text('Done.')], 'stop'));
  },
  'call without id': (sm) => {
    sm.appendMessage(user('run make'));
    sm.appendMessage(assistant([text('Running.'), call(undefined, 'make')]));
    sm.appendMessage(user('did it work?'));
    sm.appendMessage(assistant([text('No.')], 'stop'));
  },
  'partialJson leftover of a cut-off stream': (sm) => {
    sm.appendMessage(user('write the file'));
    sm.appendMessage(assistant([text('Writing.'), { type: 'toolCall', id: 'toolu_07', name: 'write', arguments: {}, partialJson: '{"path":"a.t' }], 'aborted'));
    sm.appendMessage(user('go on'));
    sm.appendMessage(assistant([text('Going on.')], 'stop'));
  },
  'orphan result': (sm) => {
    sm.appendMessage(user('hi'));
    sm.appendMessage(assistant([text('Hello.')], 'stop'));
    sm.appendMessage(result('toolu_gone', 'stale output'));
    sm.appendMessage(user('what now?'));
    sm.appendMessage(assistant([text('Nothing.')], 'stop'));
  },
  'duplicate result (a retried tool)': (sm) => {
    sm.appendMessage(user('list'));
    sm.appendMessage(assistant([call('toolu_01')]));
    sm.appendMessage(result('toolu_01', 'a.txt'));
    sm.appendMessage(result('toolu_01', 'a.txt (again)'));
    sm.appendMessage(assistant([text('One file.')], 'stop'));
  },
  // pi-ai's openai-responses provider keeps a reasoning item as a thinking block whose
  // signature is the item's JSON; a turn that hit the output limit during its reasoning
  // holds it alone, and pi-ai sends it followed by the next user message.
  'OpenAI Responses turn cut by the output limit after its reasoning': (sm) => {
    const reasoning = (id) => ({ type: 'thinking', thinking: 'Plan the listing.',
      thinkingSignature: JSON.stringify({ type: 'reasoning', id, summary: [{ type: 'summary_text', text: 'Plan the listing.' }], encrypted_content: 'gAAAAB_enc' }) });
    const openai = (content, stopReason) => ({ ...assistant(content, stopReason), api: 'openai-responses', provider: 'openai', model: RESPONSES.id });
    sm.appendMessage(user('list my files'));
    sm.appendMessage(openai([reasoning('rs_01')], 'length'));
    sm.appendMessage(user('and now?'));
    sm.appendMessage(openai([reasoning('rs_02'), text('Listing.')], 'stop'));
    return { provider: 'openai-responses' };
  },
  'branch and compaction': (sm) => {
    sm.appendMessage(user('build'));
    const a = sm.appendMessage(assistant([call('toolu_01', 'make')]));
    const r = sm.appendMessage(result('toolu_01', 'ok'));
    sm.appendMessage(user('try another way'));
    sm.appendMessage(assistant([call('toolu_02', 'cmake')])); // abandoned: off the path
    sm.branch(r);
    const kept = sm.appendMessage(result('toolu_09', 'late output of a call compacted away'));
    sm.appendMessage(user('ship it'));
    sm.appendCompaction('Built the project.', kept, 12000);
    sm.appendMessage(assistant([call('toolu_03', 'git push')]));
    sm.appendMessage(user('pushed?'));
    return { offPath: 2, a };
  },
};

// request builds what pi-ai would send to Anthropic (or OpenAI's Responses API) for the
// session's context.
async function request(messages, provider = 'anthropic') {
  let payload;
  const [streamFn, model] = provider === 'anthropic' ? [streamAnthropic, MODEL] : [streamOpenAIResponses, RESPONSES];
  const stream = streamFn(model, { systemPrompt: 'x', messages: convertToLlm(messages) }, {
    apiKey: 'sk-conformance',
    onPayload: (p) => {
      payload = p;
      throw new Error('conformance: stop before the request is sent');
    },
  });
  for await (const _ of stream) { /* drain: the error event ends it */ }
  if (!payload) throw new Error(`pi-ai built no ${provider} request`);
  return provider === 'anthropic' ? payload.messages : payload.input.filter((i) => i.role !== 'developer');
}

// verdict checks the context as stored (openclaw) and as sent (anthropic, or the provider
// the case names).
async function verdict(h, sm, provider = 'anthropic') {
  const messages = sm.buildSessionContext().messages;
  const r = h.tmend(['check', '--json', '--dialect', 'openclaw', '-'], JSON.stringify(messages));
  const session = h.jsonLines(r.stdout).find((l) => l.type === 'session') ?? {};
  const stored = { clean: r.status === 0, issues: [...new Set((session.issues ?? []).map((i) => i.code))] };
  const sent = h.providerCheck(provider, await request(messages, provider));
  return { stored, sent };
}

// treeProblems: one root, no dangling parentId, the leaf the last entry.
function treeProblems(file) {
  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  const entries = lines.filter((e) => e.type !== 'session');
  const ids = new Set(entries.map((e) => e.id));
  const problems = [];
  const roots = entries.filter((e) => e.parentId === null).length;
  if (roots !== 1) problems.push(`the tree has ${roots} roots`);
  for (const e of entries) {
    if (e.parentId !== null && !ids.has(e.parentId)) problems.push(`entry ${e.id} has a dangling parentId ${e.parentId}`);
  }
  if (ids.size !== entries.length) problems.push('ids repeat');
  return problems;
}

function userTexts(h, file) {
  const entries = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  return h.texts(entries.filter((e) => e.type === 'message' && e.message.role === 'user').map((e) => e.message));
}

export function cases(h) {
  return Object.entries(BREAKS).map(([name, build]) => ({
    name: `session-file: ${name}`,
    run: async () => {
      const problems = [];
      const dir = mkdtempSync(join(tmpdir(), 'tmend-sessionfile-'));
      try {
        const sm = SessionManager.create('/home/dev/proj', dir);
        const want = build(sm) ?? {};
        const file = sm.getSessionFile();
        const before = await verdict(h, sm, want.provider);
        if (before.stored.clean && before.sent.clean) problems.push('pi builds a valid context from the "broken" session: the case proves nothing');
        const wantTexts = userTexts(h, file);

        if (want.pendingFirst) {
          const p = h.tmend(['fix', '--in-place', '--json', file], '');
          const st = h.jsonLines(p.stderr).find((l) => l.type === 'session')?.status;
          if (st !== 'pending') problems.push(`a session written just now is ${st}, want pending (its last call may still run)`);
        }
        const r = h.tmend(['fix', '--in-place', '--json', ...(want.pendingFirst ? ['--force'] : []), file], '');
        const report = h.jsonLines(r.stderr).find((l) => l.type === 'session') ?? {};
        if (r.status !== 0) problems.push(`tmend fix --in-place exited ${r.status}: ${r.stderr.trim().split('\n').at(-1)}`);
        if (report.status !== 'repaired') problems.push(`tmend says ${report.status}: ${report.reason ?? ''}`);
        if (want.offPath !== undefined && report.off_path_entries !== want.offPath) {
          problems.push(`tmend reports ${report.off_path_entries} entries off the path, want ${want.offPath}`);
        }
        const backups = readdirSync(dir).filter((f) => f.includes('.tmend-') && f.endsWith('.bak'));
        if (backups.length !== 1) problems.push(`want one backup beside the file, found ${backups.length}`);

        const loaded = SessionManager.open(file, dir);
        const after = await verdict(h, loaded, want.provider);
        if (!after.stored.clean) problems.push(`the repaired context breaks the rules: ${after.stored.issues.join(', ')}`);
        if (!after.sent.clean) problems.push(`the repaired request breaks the provider's rules: ${after.sent.issues.join(', ')}`);
        problems.push(...treeProblems(file));
        const have = userTexts(h, file);
        const lost = [...wantTexts].filter((t) => !have.has(t));
        if (lost.length) problems.push(`text lost: ${lost.map((t) => JSON.stringify(t)).join(', ')}`);
        if (loaded.getLeafId() !== JSON.parse(readFileSync(file, 'utf8').trim().split('\n').at(-1)).id) problems.push('the leaf is not the last entry');

        const show = (v) => `stored ${v.stored.clean ? 'clean' : v.stored.issues.join('+')}, sent ${v.sent.clean ? 'clean' : v.sent.issues.join('+')}`;
        return { summary: `before: ${show(before)}; tmend ${report.status}; after: ${show(after)}`, problems };
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  }));
}
