// Sessions kept one row per message, in the tables the platforms create and write with their
// own storage code: LangChain's PostgresChatMessageHistory (@langchain/community), Mastra's
// PostgresStore (@mastra/pg) and the Vercel AI chatbot template's "Message_v2" (its DDL in
// store/testdata, rows inserted as its saveMessages does). Each case writes broken sessions
// through the library, requires the library's own read to build a request the provider rules
// reject, runs `tmend migrate up` and `tmend scan --preset P`, requires the library's read to
// build valid requests (every text a person wrote still there), then `tmend rollback --run`
// and requires every row back as it was, every column. One case appends a message while
// tmend waits to write: a conflict, nothing lost.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const here = dirname(fileURLToPath(import.meta.url));
const WEATHER = { city: 'Paris', celsius: 21 };

export function cases(h) {
  return [
    { name: 'tables langchain-postgres: PostgresChatMessageHistory', run: () => withDB(h, 'tables_langchain', (url) => langchain(h, url)) },
    { name: 'tables langchain-postgres: a message appended while tmend writes is a conflict', run: () => withDB(h, 'tables_race', (url) => langchainRace(h, url)) },
    { name: 'tables mastra: PostgresStore saveMessages / listMessages', run: () => withDB(h, 'tables_mastra', (url) => mastraCase(h, url)) },
    { name: 'tables ai-sdk-chatbot: "Message_v2" as the template writes and reads it', run: () => withDB(h, 'tables_chatbot', (url) => chatbot(h, url)) },
  ];
}

// withDB runs fn on a fresh database, dropped afterwards unless the case found problems.
async function withDB(h, prefix, fn) {
  if (!h.databaseURL) return { summary: '', problems: ['no PostgreSQL server: set TMEND_TEST_DATABASE_URL (scripts/conformance.sh does)'] };
  const name = `${prefix}_${process.pid}`;
  const admin = new pg.Client({ connectionString: h.databaseURL });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.query(`CREATE DATABASE ${name}`);
    // Not new URL(): a libpq URL may have no host (postgres://user@/db?host=/socket/dir).
    const res = await fn(h.databaseURL.replace(/^(postgres(?:ql)?:\/\/[^/?]*)(\/[^?]*)?/, `$1/${name}`));
    if (res.problems.length) res.problems.push(`database ${name} kept for a look`);
    else await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
    return res;
  } finally {
    await admin.end();
  }
}

// newPool: a client pool.end() is still closing when DROP DATABASE ... WITH (FORCE)
// terminates it emits an error that would end the process.
function newPool(url) {
  const pool = new pg.Pool({ connectionString: url });
  pool.on('error', () => {});
  return pool;
}

// flow is what every case proves, given the platform's table (the sessions written) and its
// own read: broken before, repaired by tmend, valid after, restored exactly by rollback.
async function flow(h, url, { preset, sessions, load, rows }) {
  const problems = [];
  const said = [];
  const before = {};
  for (const id of sessions) {
    const v = await verdict(h, () => load(id));
    before[id] = v;
    if (v.clean) problems.push(`session ${id}: the library's read builds a request the provider rules accept: the case proves nothing`);
  }
  said.push(`before: ${sessions.map((id) => before[id].what).join(', ')}`);
  const rowsBefore = await rows();

  const db = ['--database-url', url];
  const mig = h.tmend(['migrate', 'up', ...db]);
  if (mig.status !== 0) return { summary: said.join('; '), problems: [...problems, `tmend migrate up exited ${mig.status}: ${mig.stderr.trim()}`] };
  const scan = h.tmend(['scan', '--preset', preset, '--full', '--force', '--json', ...db]);
  let run;
  try {
    run = JSON.parse(scan.stdout);
  } catch {
    return { summary: said.join('; '), problems: [...problems, `tmend scan exited ${scan.status} with no JSON: ${scan.stderr.trim()}`] };
  }
  if (scan.status !== 0) problems.push(`tmend scan exited ${scan.status}: ${scan.stderr.trim()} ${scan.stdout.trim()}`);
  said.push(`tmend scan: run ${run.id} ${run.status}, repaired ${run.counts?.repaired} of ${run.counts?.scanned}`);
  if (run.counts?.repaired !== sessions.length) problems.push(`tmend repaired ${run.counts?.repaired} sessions, want ${sessions.length}: ${scan.stdout.trim()}`);

  for (const id of sessions) {
    const v = await verdict(h, () => load(id));
    if (!v.clean) problems.push(`session ${id} after the repair: ${v.what}`);
    const lost = [...before[id].texts].filter((t) => !v.texts.has(t));
    if (lost.length) problems.push(`session ${id}: text lost in the repair: ${lost.map((t) => JSON.stringify(t)).join(', ')}`);
  }
  said.push('after: the library builds valid requests');

  const rb = h.tmend(['rollback', '--run', String(run.id), '--preset', preset, '--json', ...db]);
  if (rb.status !== 0) problems.push(`tmend rollback --run ${run.id} exited ${rb.status}: ${rb.stderr.trim()} ${rb.stdout.trim()}`);
  const rowsAfter = await rows();
  if (rowsAfter !== rowsBefore) problems.push(`rollback left other rows than the library wrote:\n  before ${rowsBefore}\n  after  ${rowsAfter}`);
  else said.push('rollback: every row back, every column');
  return { summary: said.join('; '), problems };
}

// verdict builds the request and checks it with tmend's provider rules; a library error is
// a verdict too (a broken one).
async function verdict(h, build) {
  let req;
  try {
    req = await build();
  } catch (e) {
    if (e.code === 'ERR_ASSERTION' || e instanceof TypeError || e instanceof ReferenceError) throw e;
    return { clean: false, what: `${e.name}: ${e.message.replace(/\s+/g, ' ').slice(0, 200)}`, texts: new Set() };
  }
  const k = h.providerCheck(req.dialect, req.messages);
  return { clean: k.clean, what: k.clean ? 'valid' : `${req.dialect} rejects: ${k.issues.join(', ')}`, texts: h.texts(req.messages) };
}

function capture(h, reply) {
  const s = h.stub(reply ?? h.anthropicReply([{ type: 'text', text: 'ok' }]));
  return s;
}

// one returns the single request a stub captured.
function one(seen) {
  if (seen.length !== 1) throw Object.assign(new Error(`want one request, got ${seen.length}`), { code: 'ERR_ASSERTION' });
  return seen[0].body;
}

// ---------------------------------------------------------------------------------------------
// LangChain JS: PostgresChatMessageHistory creates langchain_chat_histories and adds one row
// a message; getMessages() reads them ORDER BY id; ChatAnthropic sends them.

async function langchain(h, url) {
  const { PostgresChatMessageHistory } = await import('@langchain/community/stores/message/postgres');
  const { HumanMessage, ToolMessage } = await import('@langchain/core/messages');
  const { ChatAnthropic } = await import('@langchain/anthropic');
  const chat = (reply) => {
    const s = capture(h, reply);
    return { model: new ChatAnthropic({ model: 'claude-sonnet-4-5', apiKey: 'stub', maxRetries: 0, clientOptions: { fetch: s.fetch } }), seen: s.seen };
  };
  // A call as an app gets it: ChatAnthropic's own conversion of a response that calls a tool.
  const call = async (id) => {
    const { model } = chat(h.anthropicReply([{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id, name: 'get_weather', input: { city: 'Paris' } }], 'tool_use'));
    return model.invoke([new HumanMessage('Weather in Paris?')]);
  };
  const result = (ai) => new ToolMessage({ content: JSON.stringify(WEATHER), tool_call_id: ai.tool_calls[0].id, name: 'get_weather' });

  const pool = newPool(url);
  try {
    const history = (sessionId) => new PostgresChatMessageHistory({ pool, sessionId });
    const sessions = {
      'lc-no-result': async () => { const ai = await call('toolu_01'); return [new HumanMessage('Weather in Paris?'), ai, new HumanMessage('Are you still there?')]; },
      'lc-orphan': async () => {
        const ai = await call('toolu_02');
        return [new HumanMessage('Weather in Paris?'), ai, result(ai), new ToolMessage({ content: 'late result', tool_call_id: 'toolu_99', name: 'get_weather' }), new HumanMessage('And tomorrow?')];
      },
      'lc-duplicate': async () => { const ai = await call('toolu_03'); return [new HumanMessage('Weather in Paris?'), ai, result(ai), result(ai), new HumanMessage('And tomorrow?')]; },
    };
    // Interleaved, as concurrent sessions are: SERIAL ids of the sessions alternate.
    const built = Object.fromEntries(await Promise.all(Object.entries(sessions).map(async ([id, b]) => [id, await b()])));
    for (let i = 0; i < 5; i++) {
      for (const [id, msgs] of Object.entries(built)) if (msgs[i]) await history(id).addMessage(msgs[i]);
    }
    return await flow(h, url, {
      preset: 'langchain-postgres',
      sessions: Object.keys(sessions),
      load: async (id) => {
        const { model, seen } = chat();
        await model.invoke(await history(id).getMessages());
        return { dialect: 'anthropic', messages: one(seen).messages };
      },
      rows: async () => (await pool.query('SELECT json_agg(t ORDER BY id)::text AS j FROM langchain_chat_histories t')).rows[0].j,
    });
  } finally {
    await pool.end();
  }
}

// langchainRace appends a message to a session after tmend read it and before it writes:
// tmend's write waits for the table lock this case holds (it places rows on the SERIAL id),
// the append commits, and tmend must find the rows changed: a conflict, nothing written,
// nothing lost; the next run repairs the session with the appended message last.
async function langchainRace(h, url) {
  const { PostgresChatMessageHistory } = await import('@langchain/community/stores/message/postgres');
  const { HumanMessage, AIMessage, mapChatMessagesToStoredMessages } = await import('@langchain/core/messages');
  const problems = [];
  const pool = newPool(url);
  const locker = new pg.Client({ connectionString: url });
  locker.on('error', () => {});
  await locker.connect();
  try {
    const history = new PostgresChatMessageHistory({ pool, sessionId: 'lc-race' });
    const call = new AIMessage({ content: 'Checking.', tool_calls: [{ id: 'toolu_01', name: 'get_weather', args: { city: 'Paris' }, type: 'tool_call' }] });
    for (const m of [new HumanMessage('Weather in Paris?'), call, new HumanMessage('Are you still there?')]) await history.addMessage(m);
    const db = ['--database-url', url];
    const mig = h.tmend(['migrate', 'up', ...db]);
    if (mig.status !== 0) return { summary: '', problems: [`tmend migrate up exited ${mig.status}: ${mig.stderr.trim()}`] };

    await locker.query('BEGIN');
    await locker.query('LOCK TABLE langchain_chat_histories IN ROW EXCLUSIVE MODE');
    const child = spawn(h.TMEND, ['scan', '--preset', 'langchain-postgres', '--full', '--force', '--json', ...db]);
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    const exited = new Promise((res) => child.on('close', res));
    // tmend has read the session once its write waits for the table.
    let waiting = false;
    for (let i = 0; i < 600 && !waiting; i++) {
      const { rows } = await pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()
        AND wait_event_type = 'Lock' AND query LIKE 'LOCK TABLE%'`);
      waiting = rows[0].n > 0;
      if (!waiting) await new Promise((r) => setTimeout(r, 50));
    }
    const appended = new HumanMessage('appended meanwhile');
    const { data, type } = mapChatMessagesToStoredMessages([appended])[0];
    // As addMessage does, in the transaction that holds the lock.
    await locker.query('INSERT INTO langchain_chat_histories (session_id, message) VALUES ($1, $2)', ['lc-race', { ...data, type }]);
    await locker.query('COMMIT');
    const status = await exited;
    if (!waiting) problems.push('tmend never waited for the table lock: the race was not driven');
    let run;
    try {
      run = JSON.parse(out);
    } catch {
      return { summary: '', problems: [...problems, `tmend scan exited ${status} with no JSON`] };
    }
    if (run.counts?.conflict !== 1 || run.counts?.repaired !== 0) problems.push(`want the session a conflict, not repaired: ${JSON.stringify(run.counts)}`);
    const texts = (msgs) => msgs.map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)));
    const after = texts(await history.getMessages());
    const want = ['Weather in Paris?', 'Checking.', 'Are you still there?', 'appended meanwhile'];
    if (JSON.stringify(after) !== JSON.stringify(want)) problems.push(`after the conflict getMessages() reads ${JSON.stringify(after)}, want ${JSON.stringify(want)}`);

    const again = h.tmend(['scan', '--preset', 'langchain-postgres', '--full', '--force', '--json', ...db]);
    const run2 = JSON.parse(again.stdout || '{}');
    if (run2.counts?.repaired !== 1) problems.push(`the next run repaired ${run2.counts?.repaired}, want 1: ${again.stderr.trim()}`);
    const msgs = await history.getMessages();
    if (msgs.at(-1)?.content !== 'appended meanwhile') problems.push(`after the next run the appended message is not last: ${JSON.stringify(texts(msgs))}`);
    if (!msgs.some((m) => m.tool_call_id === 'toolu_01')) problems.push('the next run did not answer the call');
    return {
      summary: `tmend waited for the lock: ${waiting}; run: ${JSON.stringify(run.counts)}; next run repaired ${run2.counts?.repaired}, ${msgs.length} messages, the appended one last`,
      problems,
    };
  } finally {
    await locker.end();
    await pool.end();
  }
}

// ---------------------------------------------------------------------------------------------
// Mastra: PostgresStore creates mastra_messages; saveMessages writes MessageList's stored
// messages, listMessages reads a thread ORDER BY "createdAt"; the prompt is built as an
// Agent does (MessageList llmPrompt) and sent with AI SDK 5's Anthropic provider.

async function mastraCase(h, url) {
  const { PostgresStore } = await import('@mastra/pg');
  const { MessageList } = await import('@mastra/core/agent/message-list');
  const { createAnthropic } = await import('ai-sdk-anthropic5');
  const thread = { id: 'thread_1', resourceId: 'user_1' };
  const pool = newPool(url);
  const store = new PostgresStore({ id: 'tmend-conformance', pool });
  try {
    await store.init();
    const memory = await store.getStore('memory');
    const now = new Date();
    await memory.saveThread({ thread: { ...thread, title: 'weather', metadata: {}, createdAt: now, updatedAt: now } });
    const stored = (ui) => {
      const ml = new MessageList({ threadId: thread.id, resourceId: thread.resourceId });
      ml.add(ui, 'response');
      return ml.get.all.db();
    };
    const user = (id, text) => ({ id, role: 'user', parts: [{ type: 'text', text }] });
    const answer = {
      id: 'msg_a1', role: 'assistant', parts: [
        { type: 'tool-get_weather', toolCallId: 'toolu_01', state: 'output-available', input: { city: 'Paris' }, output: WEATHER },
        { type: 'text', text: 'It is 21 degrees.' },
      ],
    };
    // A retry stored the assistant message twice (under a new id): duplicate tool_use ids.
    const [u1, a1] = stored([user('msg_u1', 'Weather in Paris?'), answer]);
    const [u2] = stored([user('msg_u2', 'Thanks!')]);
    const t0 = Date.UTC(2026, 0, 1, 9, 0, 0);
    const rows = [u1, a1, { ...a1, id: 'msg_a1_retry' }, u2].map((m, i) => ({ ...m, createdAt: new Date(t0 + i * 1000) }));
    await memory.saveMessages({ messages: rows });

    return await flow(h, url, {
        preset: 'mastra',
        sessions: [thread.id],
        load: async (id) => {
          const { messages } = await memory.listMessages({ threadId: id, perPage: false });
          const ml = new MessageList({ threadId: id, resourceId: thread.resourceId });
          ml.add(messages, 'memory');
          const s = capture(h);
          await createAnthropic({ apiKey: 'stub', fetch: s.fetch })('claude-sonnet-4-5').doGenerate({ prompt: await ml.get.all.aiV5.llmPrompt() });
          return { dialect: 'anthropic', messages: one(s.seen).messages };
        },
        rows: async () => (await pool.query('SELECT json_agg(t ORDER BY id)::text AS j FROM mastra_messages t')).rows[0].j,
      });
  } finally {
    await pool.end();
  }
}

// ---------------------------------------------------------------------------------------------
// The Vercel AI chatbot template: its tables from its migration (store/testdata), a Chat and
// its messages inserted as saveMessages does ({id: uuid, chatId, role, parts, attachments: [],
// createdAt}), read as getMessagesByChatId does (ORDER BY "createdAt") and turned into
// UIMessages {id, role, parts}, then validateUIMessages, convertToModelMessages and
// generateText (AI SDK 6) with a stubbed Anthropic.

async function chatbot(h, url) {
  const ai = await import('ai6');
  const { createAnthropic } = await import('ai-sdk-anthropic6');
  const pool = newPool(url);
  try {
    await pool.query(readFileSync(join(here, '..', '..', 'store', 'testdata', 'ai-sdk-chatbot.sql'), 'utf8'));
    const chats = {
      // The stream ended before the tool ran: the part stayed input-available.
      '00000000-0000-4000-8000-000000000001': [
        { role: 'user', parts: [{ type: 'text', text: 'Weather in Paris?' }] },
        { role: 'assistant', parts: [{ type: 'text', text: 'Checking.' }, { type: 'tool-getWeather', toolCallId: 'toolu_01', state: 'input-available', input: { city: 'Paris' } }] },
        { role: 'user', parts: [{ type: 'text', text: 'Are you still there?' }] },
      ],
      // A retry saved the answer twice.
      '00000000-0000-4000-8000-000000000002': [
        { role: 'user', parts: [{ type: 'text', text: 'Weather in Rome?' }] },
        { role: 'assistant', parts: [{ type: 'tool-getWeather', toolCallId: 'toolu_02', state: 'output-available', input: { city: 'Rome' }, output: WEATHER }, { type: 'text', text: 'It is 21 degrees.' }] },
        { role: 'assistant', parts: [{ type: 'tool-getWeather', toolCallId: 'toolu_02', state: 'output-available', input: { city: 'Rome' }, output: WEATHER }, { type: 'text', text: 'It is 21 degrees.' }] },
        { role: 'user', parts: [{ type: 'text', text: 'Thanks!' }] },
      ],
    };
    const t0 = Date.UTC(2026, 0, 1, 9, 0, 0);
    for (const [chatId, msgs] of Object.entries(chats)) {
      await pool.query('INSERT INTO "Chat" (id) VALUES ($1)', [chatId]);
      for (const [i, m] of msgs.entries()) {
        await pool.query('INSERT INTO "Message_v2" (id, "chatId", role, parts, attachments, "createdAt") VALUES (gen_random_uuid(), $1, $2, $3, $4, $5)',
          [chatId, m.role, JSON.stringify(m.parts), '[]', new Date(t0 + i * 1000)]);
      }
    }
    // A vote on the first answer, as the template's voteMessage stores it (the foreign key
    // to "Message_v2" holds that row in place).
    await pool.query(`INSERT INTO "Vote_v2" ("chatId", "messageId", "isUpvoted")
      SELECT "chatId", id, true FROM "Message_v2" WHERE "chatId" = $1 AND role = 'assistant' ORDER BY "createdAt" LIMIT 1`, ['00000000-0000-4000-8000-000000000002']);
    return await flow(h, url, {
      preset: 'ai-sdk-chatbot',
      sessions: Object.keys(chats),
      load: async (chatId) => {
        const { rows } = await pool.query('SELECT * FROM "Message_v2" WHERE "chatId" = $1 ORDER BY "createdAt" ASC', [chatId]);
        const ui = await ai.validateUIMessages({ messages: rows.map((r) => ({ id: r.id, role: r.role, parts: r.parts })) });
        const s = capture(h);
        const model = createAnthropic({ apiKey: 'stub', fetch: s.fetch })('claude-sonnet-4-5');
        await ai.generateText({ model, messages: await ai.convertToModelMessages(ui), maxRetries: 0 });
        return { dialect: 'anthropic', messages: one(s.seen).messages };
      },
      rows: async () => (await pool.query(`SELECT json_build_array(
        (SELECT json_agg(t ORDER BY id) FROM "Message_v2" t), (SELECT json_agg(v ORDER BY "messageId") FROM "Vote_v2" v))::text AS j`)).rows[0].j,
    });
  } finally {
    await pool.end();
  }
}
