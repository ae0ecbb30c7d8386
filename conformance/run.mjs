#!/usr/bin/env node
// tmend against the real libraries. For each case: build a broken session with the library's
// own types and serialization, record the library's own verdict on it (its error, or the
// provider request it builds, checked with `tmend check --dialect <provider>`), repair the
// stored session with `tmend fix`, load the result back through the same library and require
// that it builds a request with no error and that the request passes tmend's provider rules.
// No request leaves the machine: every provider gets a stubbed fetch that captures the request
// body and answers with a canned minimal response, and the global fetch throws.
//
//   node run.mjs [-v] [FILTER...]    FILTER: substrings of case names (any one matches)
//   TMEND_BIN=path/to/tmend           default: bin/tmend in the repository
//
// Exit 0 when every case passed, 1 otherwise.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// No tracing, no telemetry: set before the libraries are loaded.
process.env.LANGCHAIN_TRACING_V2 = 'false';
process.env.LANGSMITH_TRACING = 'false';
process.env.MASTRA_TELEMETRY_DISABLED = '1';
globalThis.AI_SDK_LOG_WARNINGS = false; // the AI SDK's own warnings (dropped reasoning metadata)
globalThis.fetch = async (input) => {
  throw new Error(`conformance: a request to ${input?.url ?? input} bypassed the stubs`);
};

const ai4 = await import('ai4');
const ai5 = await import('ai5');
const ai6 = await import('ai6');
const ai7 = await import('ai7');
const AI = {
  4: { ai: ai4, anthropic: (await import('ai-sdk-anthropic4')).createAnthropic, openai: (await import('ai-sdk-openai4')).createOpenAI },
  5: { ai: ai5, anthropic: (await import('ai-sdk-anthropic5')).createAnthropic, openai: (await import('ai-sdk-openai5')).createOpenAI },
  6: { ai: ai6, anthropic: (await import('ai-sdk-anthropic6')).createAnthropic, openai: (await import('ai-sdk-openai6')).createOpenAI },
  7: { ai: ai7, anthropic: (await import('ai-sdk-anthropic7')).createAnthropic, openai: (await import('ai-sdk-openai7')).createOpenAI },
};
const lcMessages = await import('@langchain/core/messages');
const { load: lcLoad } = await import('@langchain/core/load');
const { ChatAnthropic } = await import('@langchain/anthropic');
const { ChatOpenAI } = await import('@langchain/openai');
let mastra = null;
try {
  mastra = await import('@mastra/core/agent/message-list');
} catch (e) {
  console.log(`note: @mastra/core does not load (${e.message.split('\n')[0]}): the Mastra cases fail`);
}

const here = dirname(fileURLToPath(import.meta.url));
const TMEND = process.env.TMEND_BIN ? resolve(process.env.TMEND_BIN) : join(here, '..', 'bin', 'tmend');
const args = process.argv.slice(2);
const verbose = args.includes('-v');
const filters = args.filter((a) => a !== '-v');

// ---------------------------------------------------------------------------------------------
// tmend

function tmend(argv, input) {
  const r = spawnSync(TMEND, argv, { input, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error) throw new Error(`running ${TMEND}: ${r.error.message}`);
  return r;
}

function jsonLines(text) {
  return text.split('\n').filter((l) => l.trim().startsWith('{')).map((l) => JSON.parse(l));
}

// providerCheck runs `tmend check --dialect D --target T` on a captured request's messages:
// the pairing rules, and the provider's own rules for call ids. An OpenAI chat request whose
// assistant content holds a part OpenAI rejects fails before that (tmend does not read
// part types, and takes other providers' blocks for another dialect), and so does an OpenAI
// request holding a message or item whose content is an empty array ("Invalid
// 'messages[N].content': empty array. Expected an array with minimum length 1", and
// 'input[N].content' for Responses).
const TARGET = { anthropic: 'anthropic', 'openai-chat': 'openai', 'openai-responses': 'openai-responses' };
function providerCheck(dialect, messages) {
  const empty = messages.findIndex((m) => Array.isArray(m?.content) && m.content.length === 0);
  if (dialect !== 'anthropic' && empty >= 0) {
    return { clean: false, status: 'rejected', issues: [`empty_content_array(${empty})`] };
  }
  if (dialect === 'openai-chat' && openaiAssistantParts(messages).length) {
    return { clean: false, status: 'rejected', issues: [`assistant_content_part_type(${openaiAssistantParts(messages).join(',')})`] };
  }
  const r = tmend(['check', '--json', '--dialect', dialect, '--target', TARGET[dialect], '-'], JSON.stringify(messages));
  if (r.status !== 0 && r.status !== 3) {
    throw new Error(`tmend check --dialect ${dialect} exited ${r.status}: ${r.stderr.trim()}`);
  }
  const session = jsonLines(r.stdout).find((l) => l.type === 'session') ?? {};
  const issues = [...new Set((session.issues ?? []).map((i) => i.code))];
  return { clean: r.status === 0, status: session.status, issues };
}

// openaiAssistantParts returns the types of the assistant content parts OpenAI chat rejects:
// the openai package's ChatCompletionAssistantMessageParam takes text and refusal parts only
// (OpenAI: "Invalid value: 'server_tool_use'. Supported values are: 'text' and 'refusal'.").
function openaiAssistantParts(messages) {
  return messages.filter((m) => m.role === 'assistant' && Array.isArray(m.content))
    .flatMap((m) => m.content.map((p) => p?.type).filter((t) => t !== 'text' && t !== 'refusal'));
}

// fix runs `tmend fix --force` on a stored session; it returns the repaired session and the
// report's session line.
function fix(stored, dialect, extra = []) {
  const argv = ['fix', '--json', '--force', ...(dialect ? ['--dialect', dialect] : []), ...extra, '-'];
  const r = tmend(argv, JSON.stringify(stored));
  const report = jsonLines(r.stderr).find((l) => l.type === 'session') ?? {};
  if (r.status !== 0) {
    const said = r.stderr.split('\n').filter((l) => l.trim() && !l.trim().startsWith('{')).at(-1) ?? '';
    return { error: `tmend ${argv.join(' ')} exited ${r.status}${said ? `: ${said.trim()}` : ''}`, report };
  }
  let fixed;
  try {
    fixed = JSON.parse(r.stdout);
  } catch (e) {
    return { error: `tmend fix wrote no JSON: ${e.message}`, report };
  }
  return { fixed, report };
}

// ---------------------------------------------------------------------------------------------
// Stubbed providers: each stub captures the JSON request bodies and answers with `reply(body)`.

function stub(reply) {
  const seen = [];
  const fetch = async (input, init = {}) => {
    const url = typeof input === 'string' ? input : input.url ?? String(input);
    let raw = init.body ?? (typeof input === 'object' && input.text ? await input.text() : undefined);
    if (raw instanceof Uint8Array || raw instanceof ArrayBuffer) raw = new TextDecoder().decode(raw);
    const body = JSON.parse(raw);
    seen.push({ url, body });
    return new Response(JSON.stringify(reply(body)), { status: 200, headers: { 'content-type': 'application/json' } });
  };
  return { fetch, seen };
}

const anthropicReply = (content, stop = 'end_turn') => (body) => ({
  id: 'msg_stub', type: 'message', role: 'assistant', model: body.model, content,
  stop_reason: stop, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 },
});
const openaiChatReply = (message, finish = 'stop') => (body) => ({
  id: 'chatcmpl-stub', object: 'chat.completion', created: 1767225600, model: body.model,
  choices: [{ index: 0, message: { role: 'assistant', content: null, ...message }, finish_reason: finish, logprobs: null }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});
const openaiResponsesReply = (output) => (body) => ({
  id: 'resp_stub', object: 'response', created_at: 1767225600, status: 'completed', model: body.model,
  output, error: null, incomplete_details: null, parallel_tool_calls: true, tools: [],
  usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
});
const textOK = {
  anthropic: anthropicReply([{ type: 'text', text: 'ok' }]),
  'openai-chat': openaiChatReply({ content: 'ok' }),
  'openai-responses': openaiResponsesReply([
    { type: 'message', id: 'msg_stub', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'ok', annotations: [] }] },
  ]),
};

// ---------------------------------------------------------------------------------------------
// Vercel AI SDK

const WEATHER_SCHEMA = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };

function aiModel(v, provider, reply) {
  const s = stub(reply ?? textOK[provider]);
  const { anthropic, openai } = AI[v];
  const model = provider === 'anthropic'
    ? anthropic({ apiKey: 'stub', fetch: s.fetch })('claude-sonnet-4-5')
    : openai({ apiKey: 'stub', fetch: s.fetch }).chat('gpt-4o');
  return { model, seen: s.seen };
}

// aiRequests sends ModelMessages through generateText to each provider (stubbed) and returns
// the captured requests' messages; a library error propagates.
// With webSearch, the request goes to Anthropic only, with its provider-executed web search
// tool declared (the SDK needs it to send the stored call back as a server_tool_use block).
// With responses, the request goes to OpenAI's Responses API with store: false (reasoning
// items sent whole, encrypted content included, rather than as item_references).
// With chatOnly, it goes to OpenAI chat only: a session later sent there (fixed with
// --target openai).
async function aiRequests(v, messages, { webSearch = false, responses = false, chatOnly = false } = {}) {
  const out = [];
  for (const provider of webSearch ? ['anthropic'] : chatOnly ? ['openai-chat'] : ['anthropic', 'openai-chat']) {
    const { model, seen } = aiModel(v, provider);
    const tools = webSearch ? { web_search: webSearchTool(v) } : undefined;
    await AI[v].ai.generateText({ model, messages, tools, maxRetries: 0 });
    assert.equal(seen.length, 1, `${provider}: one request`);
    out.push({ dialect: provider, messages: seen[0].body.messages });
  }
  if (responses) {
    const s = stub(textOK['openai-responses']);
    const model = AI[v].openai({ apiKey: 'stub', fetch: s.fetch }).responses('gpt-5');
    await AI[v].ai.generateText({ model, messages, maxRetries: 0, providerOptions: { openai: { store: false } } });
    out.push({ dialect: 'openai-responses', messages: s.seen[0].body.input });
  }
  return out;
}

// aiResponsesReasoningCut streams from OpenAI's Responses API (stubbed) a turn whose stream
// stops right after its reasoning item (encrypted, as with store: false), and returns the
// assistant UIMessage the client holds then: a reasoning part with the item id.
async function aiResponsesReasoningCut(v) {
  const { ai } = AI[v];
  const enc = 'gAAAAB_encrypted';
  const body = [
    { type: 'response.created', response: { id: 'resp_1', created_at: 1767225600, model: 'gpt-5' } },
    { type: 'response.output_item.added', output_index: 0, item: { type: 'reasoning', id: 'rs_01', encrypted_content: enc } },
    { type: 'response.reasoning_summary_part.added', item_id: 'rs_01', summary_index: 0 },
    { type: 'response.reasoning_summary_text.delta', item_id: 'rs_01', summary_index: 0, delta: 'The user wants the weather.' },
    { type: 'response.reasoning_summary_part.done', item_id: 'rs_01', summary_index: 0 },
    { type: 'response.output_item.done', output_index: 0, item: { type: 'reasoning', id: 'rs_01', encrypted_content: enc, summary: [{ type: 'summary_text', text: 'The user wants the weather.' }] } },
  ].map((e) => `data: ${JSON.stringify(e)}\n\n`).join('');
  const fetch = async () => new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
  const model = AI[v].openai({ apiKey: 'stub', fetch }).responses('gpt-5');
  const r = ai.streamText({ model, messages: [{ role: 'user', content: 'Weather in Paris?' }], maxRetries: 0, onError: () => {} });
  let message;
  for await (const m of ai.readUIMessageStream({ stream: r.toUIMessageStream({ sendReasoning: true }) })) message = m;
  return { ...JSON.parse(JSON.stringify(message)), id: 'msg_a1' };
}

// The UIMessage path of the chatbot template: validateUIMessages, convertToModelMessages, then
// a request.
async function aiUILoad(v, stored, opts) {
  const { ai } = AI[v];
  const ui = await ai.validateUIMessages({ messages: stored });
  const model = await ai.convertToModelMessages(ui);
  return aiRequests(v, model, opts);
}

// The ModelMessage path: the stored array (what `response.messages` returned, appended turn by
// turn) goes straight into generateText.
async function aiModelLoad(v, stored, opts) {
  const { ai } = AI[v];
  if (ai.modelMessageSchema) {
    const r = ai.modelMessageSchema.array().safeParse(stored);
    if (!r.success) throw Object.assign(new Error(`not ModelMessages: ${r.error.message.slice(0, 200)}`), { name: 'ModelMessageSchema' });
  }
  return aiRequests(v, stored, opts);
}

const webSearchTool = (v) => AI[v].anthropic({ apiKey: 'stub' }).tools.webSearch_20250305({ maxUses: 1 });

// A turn in which Anthropic ran its web search itself: server_tool_use and
// web_search_tool_result blocks, which the SDK stores as a providerExecuted tool-call and its
// tool-result inside the assistant message.
async function aiWebSearchTurn(v, prompt) {
  const { ai } = AI[v];
  const { model } = aiModel(v, 'anthropic', anthropicReply([
    { type: 'server_tool_use', id: 'srvtoolu_01', name: 'web_search', input: { query: 'weather Paris' } },
    { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_01', content: [{ type: 'web_search_result', url: 'https://example.com/paris', title: 'Paris weather', encrypted_content: 'Eo8B', page_age: null }] },
    { type: 'text', text: 'It is sunny in Paris.' },
  ]));
  const r = await ai.generateText({ model, messages: prompt, tools: { web_search: webSearchTool(v) }, maxRetries: 0 });
  return JSON.parse(JSON.stringify(r.response.messages));
}

// aiTurn runs one real generateText turn against a stubbed Anthropic that answers with a
// getWeather call; with execute, the SDK runs the tool and appends its result. It returns
// response.messages, the SDK's own ModelMessages for the turn.
async function aiTurn(v, prompt, { execute, callId = 'toolu_01', city = 'Paris' } = {}) {
  const { ai } = AI[v];
  const { model } = aiModel(v, 'anthropic', anthropicReply(
    [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: callId, name: 'getWeather', input: { city } }], 'tool_use'));
  const getWeather = ai.tool({
    description: 'Current weather for a city',
    inputSchema: ai.jsonSchema(WEATHER_SCHEMA),
    ...(execute ? { execute: async ({ city: c }) => ({ city: c, celsius: 21 }) } : {}),
  });
  const r = await ai.generateText({ model, messages: prompt, tools: { getWeather }, maxRetries: 0 });
  return JSON.parse(JSON.stringify(r.response.messages));
}

const uiUser = (id, text) => ({ id, role: 'user', parts: [{ type: 'text', text }] });
const uiAssistant = (id, ...parts) => ({ id, role: 'assistant', parts: [{ type: 'step-start' }, ...parts] });
const weatherPart = (state, extra = {}) => ({ type: 'tool-getWeather', toolCallId: 'toolu_01', state, input: { city: 'Paris' }, ...extra });

function aiCases() {
  const cases = [];
  for (const v of [5, 6, 7]) {
    const lib = `ai@${v}`;
    const ui = (name, build, extra = {}) => cases.push({ name: `ai${v} ui: ${name}`, lib, dialect: extra.dialect, kind: extra.kind ?? 'broken', build, load: (s) => aiUILoad(v, s, extra), fixArgs: extra.fixArgs });
    const mm = (name, build, extra = {}) => cases.push({ name: `ai${v} model: ${name}`, lib, kind: 'broken', build, load: (s) => aiModelLoad(v, s, extra), fixArgs: extra.fixArgs });

    ui('tool part left input-available', () => [
      uiUser('msg_u1', 'Weather in Paris?'),
      uiAssistant('msg_a1', { type: 'text', text: 'Checking the weather.', state: 'done' }, weatherPart('input-available')),
      uiUser('msg_u2', 'Are you still there?'),
    ]);
    ui('dynamic-tool part left input-available', () => [
      uiUser('msg_u1', 'Search the docs for quiet period.'),
      uiAssistant('msg_a1', { type: 'dynamic-tool', toolName: 'mcp_search', toolCallId: 'toolu_02', state: 'input-available', input: { q: 'quiet period' } }),
      uiUser('msg_u2', 'Hello?'),
    ]);
    ui('input-streaming leftover + unanswered call', () => [
      uiUser('msg_u1', 'Weather in Paris and the time in Rome?'),
      uiAssistant('msg_a1', weatherPart('input-available'),
        { type: 'tool-getTime', toolCallId: 'toolu_03', state: 'input-streaming', input: { city: 'Ro' } }),
      uiUser('msg_u2', 'Stop. Just Paris.'),
    ]);
    ui('input-streaming leftover alone', () => [
      uiUser('msg_u1', 'Time in Rome?'),
      uiAssistant('msg_a1', { type: 'text', text: 'Let me look.', state: 'done' },
        { type: 'tool-getTime', toolCallId: 'toolu_03', state: 'input-streaming', input: { city: 'Ro' } }),
      uiUser('msg_u2', 'Never mind.'),
    ], { kind: 'tolerated' });
    ui('retry duplicated the assistant message', () => {
      const answer = uiAssistant('msg_a1', weatherPart('output-available', { output: { city: 'Paris', celsius: 21 } }),
        { type: 'text', text: 'It is 21 degrees in Paris.', state: 'done' });
      return [uiUser('msg_u1', 'Weather in Paris?'), answer, { ...structuredClone(answer), id: 'msg_a1_retry' }, uiUser('msg_u2', 'Thanks!')];
    });
    ui('provider-executed web_search kept beside an unanswered call', () => [
      uiUser('msg_u1', 'Weather in Paris?'),
      uiAssistant('msg_a1',
        { type: 'tool-web_search', toolCallId: 'srvtoolu_01', state: 'output-available', providerExecuted: true, input: { query: 'weather Paris' },
          output: [{ type: 'web_search_result', url: 'https://example.com/paris', title: 'Paris weather', encryptedContent: 'Eo8B', pageAge: null }] },
        { type: 'text', text: 'It is sunny. Checking the forecast.', state: 'done' },
        weatherPart('input-available')),
      uiUser('msg_u2', 'Hello?'),
    ], { webSearch: true });
    // A session with Anthropic's web search later sent to OpenAI chat: the SDK sends the
    // provider's call as a function call without result, and OpenAI answers 400.
    ui('provider-executed web_search, the session then sent to OpenAI chat', () => [
      uiUser('msg_u1', 'Weather in Paris?'),
      uiAssistant('msg_a1',
        { type: 'tool-web_search', toolCallId: 'srvtoolu_01', state: 'output-available', providerExecuted: true, input: { query: 'weather Paris' },
          output: [{ type: 'web_search_result', url: 'https://example.com/paris', title: 'Paris weather', encryptedContent: 'Eo8B', pageAge: null }] },
        { type: 'text', text: 'It is sunny in Paris.', state: 'done' }),
      uiUser('msg_u2', 'And tomorrow?'),
    ], { chatOnly: true, fixArgs: ['--target', 'openai'] });
    // The SDK sends the reasoning part as a reasoning item followed by the user's next
    // message: OpenAI answers 400 (provided without its required following item).
    ui('OpenAI Responses stream stopped after the reasoning item', async () => {
      const a = await aiResponsesReasoningCut(v);
      assert.ok(a.parts.some((p) => p.type === 'reasoning' && p.providerMetadata?.openai?.itemId), 'the reasoning part keeps its item id');
      return [uiUser('msg_u1', 'Weather in Paris?'), a, uiUser('msg_u2', 'Hello?')];
    }, { responses: true });
    if (v >= 6) {
      const approval = (state, approvalState) => () => [
        uiUser('msg_u1', 'Delete the staging bucket.'),
        uiAssistant('msg_a1', { type: 'tool-deleteBucket', toolCallId: 'toolu_04', state, input: { bucket: 'staging' }, approval: { id: 'approval_1', ...approvalState } }),
        uiUser('msg_u2', 'Actually, what time is it?'),
      ];
      // ai 6 sends the call with no result; ai 7 drops a call still waiting for approval.
      ui('approval-requested never answered', approval('approval-requested', {}), { kind: v === 6 ? 'broken' : 'tolerated' });
      ui('approval-responded, the tool never ran', approval('approval-responded', { approved: true }));
      ui('output-denied (the denial answers the call)', approval('output-denied', { approved: false, reason: 'not now' }), { kind: 'tolerated' });
    }

    mm('call without result', async () => {
      const p = [{ role: 'user', content: 'Weather in Paris?' }];
      return [...p, ...await aiTurn(v, p), { role: 'user', content: 'Are you still there?' }];
    });
    mm('orphan result', async () => {
      const p = [{ role: 'user', content: 'Weather in Paris?' }];
      const turn = await aiTurn(v, p, { execute: true });
      const tool = turn.find((m) => m.role === 'tool');
      assert.ok(tool, 'the SDK appended a tool message');
      return [...p, tool, { role: 'user', content: 'And tomorrow?' }];
    });
    mm('duplicate result', async () => {
      const p = [{ role: 'user', content: 'Weather in Paris?' }];
      const turn = await aiTurn(v, p, { execute: true });
      const tool = turn.find((m) => m.role === 'tool');
      return [...p, ...turn, structuredClone(tool), { role: 'user', content: 'And tomorrow?' }];
    });
    mm('provider-executed web_search kept beside an unanswered call', async () => {
      const p = [{ role: 'user', content: 'Weather in Paris?' }];
      const searched = [...p, ...await aiWebSearchTurn(v, p), { role: 'user', content: 'And the forecast?' }];
      return [...searched, ...await aiTurn(v, searched), { role: 'user', content: 'Hello?' }];
    }, { webSearch: true });
    mm('provider-executed web_search, the session then sent to OpenAI chat', async () => {
      const p = [{ role: 'user', content: 'Weather in Paris?' }];
      return [...p, ...await aiWebSearchTurn(v, p), { role: 'user', content: 'And tomorrow?' }];
    }, { chatOnly: true, fixArgs: ['--target', 'openai'] });
  }
  return cases;
}

// AI SDK 4: UIMessages are {id, role, content, parts} with `tool-invocation` parts (states
// partial-call, call, result), older ones with a `toolInvocations` array instead; apps store
// what appendResponseMessages returns. convertToCoreMessages throws on a call with no result.
async function ai4Load(stored) {
  return aiRequests(4, ai4.convertToCoreMessages(stored));
}

// ai4Turn stores one real turn the way an ai 4 app does: generateText against a stubbed
// Anthropic that calls getWeather, then appendResponseMessages.
async function ai4Turn(messages, { execute } = {}) {
  const { model } = aiModel(4, 'anthropic', anthropicReply(
    [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'toolu_01', name: 'getWeather', input: { city: 'Paris' } }], 'tool_use'));
  const getWeather = ai4.tool({
    description: 'Current weather for a city',
    parameters: ai4.jsonSchema(WEATHER_SCHEMA),
    ...(execute ? { execute: async ({ city }) => ({ city, celsius: 21 }) } : {}),
  });
  const r = await ai4.generateText({ model, messages: ai4.convertToCoreMessages(messages), tools: { getWeather }, maxRetries: 0 });
  return JSON.parse(JSON.stringify(ai4.appendResponseMessages({ messages, responseMessages: r.response.messages })));
}

const ai4User = (id, text) => ({ id, role: 'user', content: text, parts: [{ type: 'text', text }] });

function ai4Cases() {
  const mk = (name, build) => ({ name: `ai4 ui: ${name}`, lib: 'ai@4', kind: 'broken', build, load: ai4Load });
  return [
    mk('tool-invocation left in state "call"', async () => [...await ai4Turn([ai4User('msg_u1', 'Weather in Paris?')]), ai4User('msg_u2', 'Are you still there?')]),
    mk('partial-call leftover (stream stopped)', async () => {
      const s = await ai4Turn([ai4User('msg_u1', 'Weather in Paris?')]);
      const a = s[1];
      for (const p of a.parts) if (p.type === 'tool-invocation') Object.assign(p.toolInvocation, { state: 'partial-call', args: { city: 'Pa' } });
      if (a.toolInvocations) a.toolInvocations = a.parts.filter((p) => p.type === 'tool-invocation').map((p) => p.toolInvocation);
      return [...s, ai4User('msg_u2', 'Hello?')];
    }),
    mk('retry duplicated the assistant message', async () => {
      const s = await ai4Turn([ai4User('msg_u1', 'Weather in Paris?')], { execute: true });
      return [...s, { ...structuredClone(s[1]), id: 'msg_a1_retry' }, ai4User('msg_u2', 'Thanks!')];
    }),
    mk('older message with toolInvocations and no parts, state "call"', async () => {
      const s = await ai4Turn([ai4User('msg_u1', 'Weather in Paris?')]);
      const { parts, ...legacy } = s[1];
      return [{ id: 'msg_u1', role: 'user', content: 'Weather in Paris?' }, legacy, { id: 'msg_u2', role: 'user', content: 'Hello?' }];
    }),
  ];
}

// ---------------------------------------------------------------------------------------------
// LangChain

const { HumanMessage, ToolMessage, mapChatMessagesToStoredMessages, mapStoredMessagesToChatMessages } = lcMessages;

// The three ways LangChain messages are stored.
const lcForms = {
  // @langchain/community PostgresChatMessageHistory.addMessage (dist/stores/message/postgres.js):
  //   const { data, type } = mapChatMessagesToStoredMessages([message])[0];
  //   INSERT ... (session_id, message) VALUES ($1, {...data, type})
  // and getMessages splits each row back into {type, data} for mapStoredMessagesToChatMessages.
  flat: {
    store: (msgs) => mapChatMessagesToStoredMessages(msgs).map(({ data, type }) => ({ ...data, type })),
    load: async (rows) => mapStoredMessagesToChatMessages(rows.map(({ type, ...data }) => ({ type, data }))),
  },
  // {type, data}: mapChatMessagesToStoredMessages itself, the shape of Python's message_to_dict.
  typed: {
    store: (msgs) => mapChatMessagesToStoredMessages(msgs),
    load: async (rows) => mapStoredMessagesToChatMessages(rows),
  },
  // {lc: 1, type: "constructor", id, kwargs}: JSON.stringify(message), LangGraph's serializer.
  lc: {
    store: (msgs) => JSON.parse(JSON.stringify(msgs)),
    load: async (rows) => lcLoad(JSON.stringify(rows)),
  },
};

// outputVersion "v1": LangChain 1's standard content blocks in the AIMessage.
function lcModel(provider, reply, { outputVersion } = {}) {
  const s = stub(reply ?? textOK[provider]);
  let model;
  if (provider === 'anthropic') {
    model = new ChatAnthropic({ model: 'claude-sonnet-4-5', apiKey: 'stub', maxRetries: 0, outputVersion, clientOptions: { fetch: s.fetch } });
  } else {
    model = new ChatOpenAI({
      model: 'gpt-4o', apiKey: 'stub', maxRetries: 0, outputVersion, configuration: { fetch: s.fetch },
      useResponsesApi: provider === 'openai-responses',
    });
  }
  return { model, seen: s.seen };
}

// lcRequest invokes the provider's chat model (stubbed) on the loaded messages and returns the
// captured request's messages (`input` for the Responses API).
async function lcRequest(provider, messages) {
  const { model, seen } = lcModel(provider);
  await model.invoke(messages);
  assert.equal(seen.length, 1, `${provider}: one request`);
  const body = seen[0].body;
  return [{ dialect: provider, messages: provider === 'openai-responses' ? body.input : body.messages }];
}

// lcCall produces an AIMessage the way an app gets it: the provider package's own conversion
// of a (canned) provider response that calls a tool.
async function lcCall(provider, { id, args = '{"city":"Paris"}', outputVersion } = {}) {
  const human = new HumanMessage('Weather in Paris?');
  let reply;
  if (provider === 'anthropic') {
    reply = anthropicReply([{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: id ?? 'toolu_01', name: 'get_weather', input: JSON.parse(args) }], 'tool_use');
  } else if (provider === 'openai-chat') {
    reply = openaiChatReply({ tool_calls: [{ id: id ?? 'call_01', type: 'function', function: { name: 'get_weather', arguments: args } }] }, 'tool_calls');
  } else {
    reply = openaiResponsesReply([{ type: 'function_call', id: 'fc_01', call_id: id ?? 'call_01', name: 'get_weather', arguments: args, status: 'completed' }]);
  }
  const { model } = lcModel(provider, reply, { outputVersion });
  const ai = await model.invoke([human]);
  return { human, ai };
}

// lcCutStream streams from ChatAnthropic through a stub whose event stream stops in the middle
// of a tool_use block's input, and returns what the app accumulated: an AIMessageChunk whose
// call LangChain parsed from the partial JSON, with the raw tool_call_chunks beside it.
async function lcCutStream() {
  const ev = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const body = [
    ev('message_start', { message: { id: 'msg_cut', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } }),
    ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Checking.' } }),
    ev('content_block_stop', { index: 0 }),
    ev('content_block_start', { index: 1, content_block: { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: {} } }),
    ev('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: '{"city": "Pa' } }),
  ].join('');
  const fetch = async () => new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
  const model = new ChatAnthropic({ model: 'claude-sonnet-4-5', apiKey: 'stub', maxRetries: 0, streaming: true, clientOptions: { fetch } });
  const human = new HumanMessage('Weather in Paris?');
  let acc;
  for await (const chunk of await model.stream([human])) acc = acc ? acc.concat(chunk) : chunk;
  return { human, ai: acc };
}

// lcCutResponsesStream streams from ChatOpenAI (Responses API) through a stub whose event
// stream stops right after a reasoning item began: the AIMessageChunk holds no content and
// no call, only additional_kwargs.reasoning.
async function lcCutResponsesStream() {
  const body = [
    { type: 'response.created', response: { id: 'resp_cut', created_at: 1767225600, model: 'gpt-5' } },
    { type: 'response.output_item.added', output_index: 0, item: { type: 'reasoning', id: 'rs_01', summary: [] } },
  ].map((e) => `data: ${JSON.stringify(e)}\n\n`).join('');
  const fetch = async () => new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
  const model = new ChatOpenAI({ model: 'gpt-5', apiKey: 'stub', maxRetries: 0, useResponsesApi: true, configuration: { fetch } });
  const human = new HumanMessage('Weather in Paris?');
  let acc;
  for await (const chunk of await model.stream([human])) acc = acc ? acc.concat(chunk) : chunk;
  return { human, ai: acc };
}

// lcWebSearch produces the AIMessage ChatAnthropic makes of an Anthropic web search reply:
// the server_tool_use and web_search_tool_result blocks stay in its content, between texts.
async function lcWebSearch() {
  const human = new HumanMessage('Weather in Paris?');
  const reply = anthropicReply([
    { type: 'text', text: "I'll search for that." },
    { type: 'server_tool_use', id: 'srvtoolu_01', name: 'web_search', input: { query: 'weather Paris' } },
    { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_01', content: [{ type: 'web_search_result', url: 'https://example.com/paris', title: 'Paris weather', encrypted_content: 'EqQBCkYIAR', page_age: null }] },
    { type: 'text', text: 'It is 21 degrees in Paris.' },
  ]);
  const { model } = lcModel('anthropic', reply);
  return { human, ai: await model.invoke([human]) };
}

// lcRedactedThinking produces the AIMessage ChatAnthropic makes of a reply with extended
// thinking, part of it redacted: thinking, redacted_thinking, text and tool_use blocks in
// its content, the call in tool_calls.
async function lcRedactedThinking() {
  const human = new HumanMessage('Weather in Paris?');
  const reply = anthropicReply([
    { type: 'thinking', thinking: 'The user wants the weather.', signature: 'EuYBCkQYAiJA' },
    { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix' },
    { type: 'text', text: 'Checking.' },
    { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } },
  ], 'tool_use');
  const { model } = lcModel('anthropic', reply);
  return { human, ai: await model.invoke([human]) };
}

// lcToolUseOnly produces the AIMessage ChatAnthropic makes of a reply that called a tool
// without writing text: only the tool_use block in its content, the call in tool_calls.
async function lcToolUseOnly() {
  const human = new HumanMessage('Weather in Paris?');
  const reply = anthropicReply([
    { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } },
  ], 'tool_use');
  const { model } = lcModel('anthropic', reply);
  return { human, ai: await model.invoke([human]) };
}

const toolMessage = (ai, i = 0) => new ToolMessage({ content: '{"city":"Paris","celsius":21}', tool_call_id: (ai.tool_calls[i] ?? ai.invalid_tool_calls[i]).id, name: 'get_weather' });

function lcCases() {
  const scenarios = [
    ['ChatAnthropic call, no ToolMessage', 'anthropic', async () => {
      const { human, ai } = await lcCall('anthropic');
      assert.ok(ai.tool_calls.length === 1 && ai.content.some?.((b) => b.type === 'tool_use'), 'ChatAnthropic keeps the call twice');
      return [human, ai, new HumanMessage('Are you still there?')];
    }],
    ['ChatAnthropic ToolMessage twice', 'anthropic', async () => {
      const { human, ai } = await lcCall('anthropic');
      return [human, ai, toolMessage(ai), toolMessage(ai), new HumanMessage('And tomorrow?')];
    }],
    ['ChatAnthropic stream cut off mid tool input (AIMessageChunk)', 'anthropic', async () => {
      const { human, ai } = await lcCutStream();
      assert.ok(ai.tool_call_chunks?.length === 1 && ai.tool_calls.length === 1, 'the chunk holds the call and its raw chunks');
      return [human, ai, new HumanMessage('Hello?')];
    }],
    ['ChatOpenAI call, no ToolMessage', 'openai-chat', async () => {
      const { human, ai } = await lcCall('openai-chat');
      assert.ok(ai.additional_kwargs.tool_calls?.length === 1, 'ChatOpenAI keeps additional_kwargs.tool_calls');
      return [human, ai, new HumanMessage('Are you still there?')];
    }],
    ['ChatOpenAI orphan ToolMessage', 'openai-chat', async () => {
      const { human, ai } = await lcCall('openai-chat');
      const answered = [human, ai, toolMessage(ai)];
      return [...answered, new ToolMessage({ content: 'late result', tool_call_id: 'call_99', name: 'get_weather' }), new HumanMessage('And tomorrow?')];
    }],
    ['ChatOpenAI invalid_tool_calls', 'openai-chat', async () => {
      const { human, ai } = await lcCall('openai-chat', { args: '{"city": "Par' });
      assert.ok(ai.invalid_tool_calls.length === 1 && ai.tool_calls.length === 0, 'ChatOpenAI files the call under invalid_tool_calls');
      return [human, ai, new HumanMessage('Hello?')];
    }],
    // LangChain JS 1 stores a "v1" AIMessage with its fields again in lc_kwargs, and its
    // contentBlocks: copies of the call that loading never reads.
    ['ChatOpenAI outputVersion "v1" call, no ToolMessage', 'openai-chat', async () => {
      const { human, ai } = await lcCall('openai-chat', { outputVersion: 'v1' });
      assert.ok(ai.content.some?.((b) => b.type === 'tool_call'), 'a "v1" AIMessage keeps the call as a tool_call content block');
      return [human, ai, new HumanMessage('Are you still there?')];
    }],
    ['ChatAnthropic outputVersion "v1" call, no ToolMessage', 'anthropic', async () => {
      const { human, ai } = await lcCall('anthropic', { outputVersion: 'v1' });
      return [human, ai, new HumanMessage('Are you still there?')];
    }],
    // ChatOpenAI sends the reasoning item followed by the next human message: OpenAI
    // answers 400 (provided without its required following item).
    ['ChatOpenAI Responses stream cut after the reasoning item began (AIMessageChunk)', 'openai-responses', async () => {
      const { human, ai } = await lcCutResponsesStream();
      assert.ok(ai.additional_kwargs.reasoning?.id === 'rs_01' && !ai.tool_calls.length, 'the chunk holds the reasoning item only');
      return [human, ai, new HumanMessage('Hello?')];
    }],
    ['ChatOpenAI Responses call, no ToolMessage', 'openai-responses', async () => {
      const { human, ai } = await lcCall('openai-responses');
      return [human, ai, new HumanMessage('Are you still there?')];
    }],
    // An OpenAI-compatible server (Kimi, for one) names calls "functions.NAME:N"; when the app
    // moves the session to ChatAnthropic, Anthropic rejects the id (^[a-zA-Z0-9_-]+$) until
    // `tmend fix --target anthropic` rewrites it in the call, its provider copy and its result.
    ['ChatOpenAI-compatible call id moved to ChatAnthropic (--target anthropic)', 'anthropic', async () => {
      const { human, ai } = await lcCall('openai-chat', { id: 'functions.get_weather:0' });
      return [human, ai, toolMessage(ai), new HumanMessage('And tomorrow?')];
    }, ['--target', 'anthropic']],
    // ChatOpenAI passes the blocks of Anthropic's server tools on as assistant content
    // parts, which OpenAI chat rejects, until `tmend fix --target openai` removes them.
    ['ChatAnthropic web search moved to ChatOpenAI (--target openai)', 'openai-chat', async () => {
      const { human, ai } = await lcWebSearch();
      assert.ok(ai.content.some?.((b) => b.type === 'server_tool_use') && !ai.tool_calls.length, 'ChatAnthropic keeps the search in content only');
      return [human, ai, new HumanMessage('Thanks. And tomorrow?')];
    }, ['--target', 'openai']],
    // ChatOpenAI passes a redacted_thinking block on as an assistant content part too (it
    // leaves thinking out), until `tmend fix --target openai` removes it.
    ['ChatAnthropic redacted thinking moved to ChatOpenAI (--target openai)', 'openai-chat', async () => {
      const { human, ai } = await lcRedactedThinking();
      assert.ok(ai.content.some?.((b) => b.type === 'redacted_thinking') && ai.tool_calls.length === 1, 'ChatAnthropic keeps the redacted thinking in content');
      return [human, ai, toolMessage(ai), new HumanMessage('Thanks. And tomorrow?')];
    }, ['--target', 'openai']],
    // ChatOpenAI leaves tool_use blocks out of content: a turn that called a tool without
    // text goes out as content [], which OpenAI rejects, until `tmend fix --target openai`
    // writes that content as "".
    ['ChatAnthropic call without text moved to ChatOpenAI (--target openai)', 'openai-chat', async () => {
      const { human, ai } = await lcToolUseOnly();
      assert.ok(ai.content.length === 1 && ai.content[0].type === 'tool_use' && ai.tool_calls.length === 1, 'ChatAnthropic keeps only the tool_use block in content');
      return [human, ai, toolMessage(ai), new HumanMessage('Thanks. And tomorrow?')];
    }, ['--target', 'openai']],
  ];
  const cases = [];
  for (const [formName, form] of Object.entries(lcForms)) {
    for (const [name, provider, build, fixArgs] of scenarios) {
      cases.push({
        name: `langchain ${formName}: ${name}`,
        lib: '@langchain/core',
        kind: 'broken',
        fixArgs,
        build: async () => form.store(await build()),
        load: async (stored) => lcRequest(provider, await form.load(stored)),
      });
    }
  }
  return cases;
}

// ---------------------------------------------------------------------------------------------
// Mastra: MessageList turns AI SDK 5 messages into its stored format 2 (what @mastra/pg
// writes, one row per message, content as JSON) and builds the prompt from stored rows the
// way an Agent does (llmPrompt); the prompt goes to a stubbed AI SDK 5 provider.

const MASTRA_THREAD = { threadId: 'thread_1', resourceId: 'user_1' };

function mastraStore(uiMessages) {
  const ml = new mastra.MessageList(MASTRA_THREAD);
  ml.add(uiMessages, 'response');
  return JSON.parse(JSON.stringify(ml.get.all.db()));
}

async function mastraLoad(rows) {
  const ml = new mastra.MessageList(MASTRA_THREAD);
  ml.add(rows.map((r) => ({ ...r, createdAt: new Date(r.createdAt) })), 'memory');
  const prompt = await ml.get.all.aiV5.llmPrompt();
  const out = [];
  for (const provider of ['anthropic', 'openai-chat']) {
    const { model, seen } = aiModel(5, provider);
    await model.doGenerate({ prompt });
    out.push({ dialect: provider, messages: seen[0].body.messages });
  }
  return out;
}

// mastraSession stores each turn through MessageList, then gives the rows the times a session
// built over a few seconds has (MessageList orders by createdAt).
function mastraSession(...turns) {
  const t0 = Date.UTC(2026, 0, 1, 9, 0, 0);
  return turns.flat().map((row, i) => {
    const r = structuredClone(row);
    r.createdAt = new Date(t0 + i * 1000).toISOString();
    for (const p of r.content.parts ?? []) if ('createdAt' in p) p.createdAt = t0 + i * 1000;
    return r;
  });
}

function mastraCases() {
  const mk = (name, kind, build) => ({ name: `mastra: ${name}`, lib: '@mastra/core', kind, build, load: mastraLoad });
  return [
    mk('retry duplicated the assistant message', 'broken', () => {
      const [user, answer] = mastraStore([
        uiUser('msg_u1', 'Weather in Paris?'),
        uiAssistant('msg_a1', weatherPart('output-available', { output: { city: 'Paris', celsius: 21 } }), { type: 'text', text: 'It is 21 degrees.' }),
      ]);
      return mastraSession(user, answer, { ...answer, id: 'msg_a1_retry' }, mastraStore([uiUser('msg_u2', 'Thanks!')]));
    }),
    // A tool that threw: MessageList writes the part in ai 5's state output-error and keeps
    // its earlier copy, state "call", in toolInvocations; the prompt reads the part.
    mk('a tool that threw (output-error part, "call" in toolInvocations), retried', 'broken', () => {
      const [user, answer] = mastraStore([
        uiUser('msg_u1', 'Weather in Paris?'),
        uiAssistant('msg_a1', weatherPart('output-error', { errorText: 'weather service down' }), { type: 'text', text: 'The weather service is down.' }),
      ]);
      assert.ok(answer.content.toolInvocations?.[0]?.state === 'call', 'MessageList keeps the call in toolInvocations');
      return mastraSession(user, answer, { ...answer, id: 'msg_a1_retry' }, mastraStore([uiUser('msg_u2', 'Thanks!')]));
    }),
    // A denied call: MessageList leaves it out of toolInvocations.
    mk('a denied call (output-denied, not in toolInvocations) beside one left in state "call"', 'tolerated', () => mastraSession(
      mastraStore([uiUser('msg_u1', 'Clear the cache, then the weather in Paris.'), uiAssistant('msg_a1',
        { type: 'tool-clearCache', toolCallId: 'toolu_05', state: 'output-denied', input: {}, approval: { id: 'approval_1', approved: false, reason: 'not now' } },
        weatherPart('input-available'))]),
      mastraStore([uiUser('msg_u2', 'Hello?')]),
    )),
    mk('tool-invocation left in state "call"', 'tolerated', () => mastraSession(
      mastraStore([uiUser('msg_u1', 'Weather in Paris?'), uiAssistant('msg_a1', { type: 'text', text: 'Checking.' }, weatherPart('input-available'))]),
      mastraStore([uiUser('msg_u2', 'Hello?')]),
    )),
  ];
}

// ---------------------------------------------------------------------------------------------
// The runner

const HARNESS_ERRORS = new Set(['TypeError', 'ReferenceError', 'SyntaxError', 'RangeError', 'AssertionError']);

// verdict loads a stored session through the library and checks each request it builds.
async function verdict(c, stored) {
  let requests;
  try {
    requests = await c.load(structuredClone(stored));
  } catch (e) {
    if (HARNESS_ERRORS.has(e.name) || e.code === 'ERR_ASSERTION') throw e;
    // A validation error's message holds the whole value; say only where it failed and why.
    const issues = e.cause?.issues ?? e.cause?.cause?.issues;
    const msg = issues
      ? `type validation failed: ${zodIssues(issues).map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`
      : e.message.replace(/\s+/g, ' ');
    return { error: `${e.name}: ${msg.slice(0, 300)}` };
  }
  const checks = requests.map((r) => ({ dialect: r.dialect, request: r.messages, ...providerCheck(r.dialect, r.messages) }));
  return { checks };
}

// zodIssues follows a failed union into its closest branch: one whose "type" or "state"
// literal matched, with the fewest issues.
function zodIssues(issues, prefix = []) {
  const literalMiss = (branch) => branch.some((i) => ['invalid_value', 'invalid_literal'].includes(i.code) && ['type', 'state'].includes(i.path?.at(-1)));
  const closest = (branches) => branches.reduce((a, b) => ((literalMiss(b) ? 1e9 : b.length) < (literalMiss(a) ? 1e9 : a.length) ? b : a));
  return issues.flatMap((i) => {
    if (i.code === 'invalid_union' && i.errors?.length) return zodIssues(closest(i.errors), [...prefix, ...(i.path ?? [])]);
    if (i.code === 'invalid_union' && i.unionErrors?.length) return zodIssues(closest(i.unionErrors.map((u) => u.issues)), prefix);
    return [{ path: [...prefix, ...(i.path ?? [])], message: i.message }];
  });
}

const isBroken = (v) => Boolean(v.error) || v.checks.some((k) => !k.clean);
const describe = (v) => v.error
  ? v.error
  : v.checks.map((k) => `${k.dialect} ${k.clean ? 'clean' : k.issues.join('+') || k.status}`).join(', ');

// texts collects what a person wrote or read: every "text" string (but a reasoning part's),
// and the string content of user and human messages. None of it may go missing in a repair.
function texts(node, out = new Set(), role) {
  if (Array.isArray(node)) {
    for (const n of node) texts(n, out, role);
  } else if (node && typeof node === 'object') {
    const r = node.lc === 1 && Array.isArray(node.id) ? node.id.at(-1) : node.role ?? node.type ?? role;
    // A model's reasoning (a dangling reasoning part goes) is no text a person wrote.
    if (node.type === 'reasoning') return out;
    for (const [k, val] of Object.entries(node)) {
      if (k === 'text' && typeof val === 'string' && val) out.add(val);
      else if (k === 'content' && typeof val === 'string' && val && ['user', 'human', 'HumanMessage'].includes(r)) out.add(val);
      else texts(val, out, r);
    }
  }
  return out;
}

async function runCase(c) {
  const res = { name: c.name, ok: false, problems: [] };
  if (c.run) {
    // A case of its own shape (conformance/cases/): it says what it saw and what went wrong.
    Object.assign(res, await c.run());
    res.ok = res.problems.length === 0;
    return res;
  }
  const stored = JSON.parse(JSON.stringify(await c.build()));
  res.stored = stored;
  res.before = await verdict(c, stored);
  if (c.kind === 'broken' && !isBroken(res.before)) {
    res.problems.push('the library and the provider rules accept the "broken" session: the case proves nothing');
  }
  if (c.kind === 'tolerated' && isBroken(res.before)) {
    res.problems.push('the library rejects a session this case expects it to tolerate');
  }
  const f = fix(stored, c.dialect, c.fixArgs);
  res.fix = f.report;
  if (f.error) {
    res.problems.push(f.error);
    return res;
  }
  res.fixed = f.fixed;
  res.after = await verdict(c, f.fixed);
  if (res.after.error) res.problems.push(`the library rejects the repaired session: ${res.after.error}`);
  for (const k of res.after.checks ?? []) {
    if (!k.clean) res.problems.push(`the repaired session's ${k.dialect} request breaks the provider rules: ${k.issues.join(', ')}`);
  }
  const lost = [...texts(stored)].filter((t) => !texts(f.fixed).has(t));
  if (lost.length) res.problems.push(`text lost in the repair: ${lost.map((t) => JSON.stringify(t)).join(', ')}`);
  res.ok = res.problems.length === 0;
  return res;
}

function fixSummary(r) {
  if (!r || !r.status) return 'no report';
  const stages = Object.entries(r.stage_counts ?? {}).map(([k, n]) => `${k} ${n}`).join(', ');
  return `${r.status}${r.dialect ? ` [${r.dialect}]` : ''}${stages ? ` (${stages})` : ''}${r.reason ? `: ${r.reason}` : ''}`;
}

// Cases kept in conformance/cases/*.mjs: each module exports cases(h), h being the helpers
// below, and returns cases with a name and run(): async () => ({summary, problems}). Cases that
// need Postgres take h.databaseURL (a server where they may CREATE DATABASE; scripts/conformance.sh
// sets it).
async function moduleCases() {
  const dir = join(here, 'cases');
  if (!existsSync(dir)) return [];
  const h = {
    TMEND, tmend, jsonLines, providerCheck, fix, stub, anthropicReply, openaiChatReply, openaiResponsesReply, texts,
    databaseURL: process.env.TMEND_TEST_DATABASE_URL, verbose,
  };
  const out = [];
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.mjs')).sort()) {
    out.push(...(await (await import(join(dir, f))).cases(h)));
  }
  return out;
}

async function main() {
  if (!existsSync(TMEND)) {
    console.error(`conformance: no tmend binary at ${TMEND} (build it, or set TMEND_BIN)`);
    process.exit(1);
  }
  let cases = [...ai4Cases(), ...aiCases(), ...lcCases(), ...mastraCases(), ...(await moduleCases())];
  if (filters.length) cases = cases.filter((c) => filters.some((f) => c.name.includes(f)));
  if (!cases.length) {
    console.error('conformance: no case matches');
    process.exit(1);
  }
  const started = Date.now();
  let passed = 0;
  let failed = 0;
  const width = Math.max(...cases.map((c) => c.name.length));
  for (const c of cases) {
    let r;
    const logged = [];
    const { warn, log } = console;
    // The libraries' own notices ("New LangChain packages are available ...") stay out of the
    // case lines; -v prints them.
    console.warn = console.log = (...a) => logged.push(a.join(' ').replace(/\s+/g, ' ').trim());
    try {
      r = await runCase(c);
    } catch (e) {
      r = { name: c.name, ok: false, problems: [`harness error: ${e.stack ?? e}`] };
    } finally {
      Object.assign(console, { warn, log });
    }
    r.logged = logged;
    r.ok ? passed++ : failed++;
    if (c.run) {
      console.log(`${r.ok ? 'PASS' : 'FAIL'}  ${c.name.padEnd(width)}  ${r.summary ?? ''}`);
      for (const p of r.problems) console.log(`        ${p}`.replaceAll('\n', '\n        '));
      if (verbose && r.logged.length) console.log(`        the libraries logged: ${r.logged.join(' / ')}`);
      continue;
    }
    const before = r.before ? describe(r.before) : '-';
    const after = r.after ? (isBroken(r.after) ? `REJECTED ${describe(r.after)}` : `accepted (${describe(r.after)})`) : '-';
    const label = c.kind === 'tolerated' ? 'library tolerates it' : 'library';
    console.log(`${r.ok ? 'PASS' : 'FAIL'}  ${c.name.padEnd(width)}  ${label}: ${before} | tmend: ${fixSummary(r.fix)} | after: ${after}`);
    for (const p of r.problems) console.log(`        ${p}`.replaceAll('\n', '\n        '));
    if (verbose && r.logged.length) console.log(`        the libraries logged: ${r.logged.join(' / ')}`);
    if (verbose || !r.ok) {
      if (r.stored) console.log(`        stored:   ${JSON.stringify(r.stored)}`);
      if (r.fixed) console.log(`        repaired: ${JSON.stringify(r.fixed)}`);
      for (const k of r.after?.checks ?? []) {
        if (verbose || !k.clean) console.log(`        ${k.dialect} request after: ${JSON.stringify(k.request)}`);
      }
    }
  }
  console.log(`conformance: ${cases.length} cases in ${((Date.now() - started) / 1000).toFixed(1)}s against ${TMEND}`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

await main();
