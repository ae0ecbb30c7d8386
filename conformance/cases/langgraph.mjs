// LangGraph's PostgresSaver (issue 26): a graph whose tools were interrupted (one call, two
// calls) or crashed leaves an AIMessage with tool_calls and no ToolMessage in its newest
// checkpoint, and every later turn sends a request the provider rejects. `tmend scan --layout
// langgraph` repairs the threads in the saver's own tables; LangGraph then reads the repaired
// list, runs the next turn with a valid request, keeps the prior checkpoint in its history,
// and `tmend rollback` restores the prior list. The model is ChatAnthropic with a stubbed
// fetch: its requests are the real ones, checked with tmend's provider rules.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { z } from 'zod';
import { ChatAnthropic } from '@langchain/anthropic';
import { AIMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { MessagesAnnotation, StateGraph, START } from '@langchain/langgraph';
import { ToolNode, toolsCondition } from '@langchain/langgraph/prebuilt';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';

export function cases(h) {
  return [{ name: 'langgraph: PostgresSaver threads interrupted and crashed, repaired by scan --layout langgraph', run: () => run(h) }];
}

async function run(h) {
  const toolUse = (...ids) => h.anthropicReply([
    { type: 'text', text: 'Checking.' },
    ...ids.map((id) => ({ type: 'tool_use', id, name: 'get_weather', input: { city: 'Paris' } })),
  ], 'tool_use');
  const text = (t) => h.anthropicReply([{ type: 'text', text: t }]);
  const problems = [];
  const seen = [];
  if (!h.databaseURL) return { summary: 'no database', problems: ['TMEND_TEST_DATABASE_URL is not set'] };
  const name = `langgraph_conformance_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: h.databaseURL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  // The same server, the new database: the URL's path (it may have no host: a socket).
  const [base, query] = h.databaseURL.split('?');
  const url = `${base.replace(/\/[^/]*$/, '')}/${name}${query ? `?${query}` : ''}`;
  const pool = new pg.Pool({ connectionString: url });
  pool.on('error', () => {}); // DROP DATABASE ... WITH (FORCE) ends what is left idle
  const saver = new PostgresSaver(pool);
  try {
    await saver.setup();
    const replies = [];
    const s = h.stub((body) => (replies.shift() ?? text('ok'))(body));
    const model = (tools) => {
      const m = new ChatAnthropic({ model: 'claude-sonnet-4-5', apiKey: 'stub', maxRetries: 0, clientOptions: { fetch: s.fetch } });
      return tools ? m.bindTools(tools) : m;
    };
    const build = ({ crash }) => {
      const weather = tool(async () => {
        if (crash) throw new Error('weather service down');
        return 'sunny';
      }, { name: 'get_weather', description: 'The weather in a city', schema: z.object({ city: z.string() }) });
      const llm = model([weather]);
      return new StateGraph(MessagesAnnotation)
        .addNode('agent', async (state) => ({ messages: [await llm.invoke(state.messages)] }))
        .addNode('tools', new ToolNode([weather], { handleToolErrors: false }))
        .addEdge(START, 'agent')
        .addConditionalEdges('agent', toolsCondition, ['tools', '__end__'])
        .addEdge('tools', 'agent')
        .compile({ checkpointer: saver, interruptBefore: crash ? [] : ['tools'] });
    };
    const interrupted = build({ crash: false });
    const crashing = build({ crash: true });
    const threads = [
      { id: 'one', graph: interrupted, reply: toolUse('toolu_01') },
      { id: 'two', graph: interrupted, reply: toolUse('toolu_01', 'toolu_02') },
      { id: 'crash', graph: crashing, reply: toolUse('toolu_01') },
    ];
    for (const t of threads) {
      t.config = { configurable: { thread_id: t.id } };
      replies.push(t.reply);
      try {
        await t.graph.invoke({ messages: [new HumanMessage('Weather in Paris?')] }, t.config);
        if (t.id === 'crash') problems.push('crash: the tool that throws did not stop the run');
      } catch (e) {
        if (t.id !== 'crash') throw e;
      }
      const state = await t.graph.getState(t.config);
      t.prior = state.values.messages;
      t.priorID = state.config.configurable.checkpoint_id;
      const v = await verdict(h, model, s, t.prior);
      seen.push(`${t.id}: ${t.prior.length} messages, next turn ${v.clean ? 'accepted' : `rejected (${v.why})`}`);
      if (v.clean) problems.push(`${t.id}: the broken state builds a valid request: the case proves nothing`);
    }

    const db = ['--database-url', url];
    const mig = h.tmend(['migrate', 'up', ...db]);
    if (mig.status !== 0) throw new Error(`tmend migrate up exited ${mig.status}: ${mig.stderr}`);
    // --force: the threads were interrupted a moment ago, within the quiet period.
    const scan = h.tmend(['scan', '--layout', 'langgraph', '--full', '--force', '--json', ...db]);
    const counts = scan.status === 0 ? JSON.parse(scan.stdout).counts ?? {} : {};
    seen.push(`scan: exit ${scan.status}, repaired ${counts.repaired}`);
    if (scan.status !== 0 || counts.repaired !== threads.length) {
      problems.push(`tmend scan exited ${scan.status} with ${counts.repaired} repaired, want ${threads.length}: ${scan.stderr.trim().split('\n').at(-1)}`);
    }

    for (const t of threads) {
      const state = await t.graph.getState(t.config);
      const msgs = state.values.messages;
      const unanswered = unansweredCalls(msgs);
      if (unanswered.length) problems.push(`${t.id}: getState() still has unanswered calls ${unanswered.join(', ')}`);
      if (state.parentConfig?.configurable?.checkpoint_id !== t.priorID) {
        problems.push(`${t.id}: the newest checkpoint's parent is not the prior newest`);
      }
      const v = await verdict(h, model, s, msgs);
      if (!v.clean) problems.push(`${t.id}: the repaired state's next request is rejected: ${v.why}`);
      const history = [];
      for await (const snap of t.graph.getStateHistory(t.config)) history.push(snap);
      const prior = history.find((snap) => snap.config.configurable.checkpoint_id === t.priorID);
      if (!prior || JSON.stringify(prior.values.messages) !== JSON.stringify(t.prior)) {
        problems.push(`${t.id}: getStateHistory() lost the prior checkpoint`);
      }
      seen.push(`${t.id}: repaired to ${msgs.length} messages (${msgs.filter((m) => ToolMessage.isInstance(m)).length} tool results), `
        + `next [${state.next.join(', ')}], history ${history.length}`);
    }

    // The next turn runs on the repaired state, and its request is valid.
    for (const t of threads.filter((t) => t.id !== 'two')) {
      replies.push(text('Sunny.'));
      const before = s.seen.length;
      await t.graph.invoke({ messages: [new HumanMessage('Thanks. And tomorrow?')] }, t.config);
      const sent = s.seen.slice(before);
      if (sent.length !== 1) {
        problems.push(`${t.id}: the next invoke sent ${sent.length} requests, want 1`);
        continue;
      }
      const c = h.providerCheck('anthropic', sent[0].body.messages);
      if (!c.clean) problems.push(`${t.id}: the next invoke's request breaks the provider rules: ${c.issues.join(', ')}`);
      seen.push(`${t.id}: next invoke ${c.clean ? 'valid' : 'rejected'}`);
    }

    // Rollback: a further checkpoint holding the prior list.
    const two = threads.find((t) => t.id === 'two');
    const rb = h.tmend(['rollback', '--layout', 'langgraph', '--session', 'two', ...db]);
    if (rb.status !== 0) problems.push(`tmend rollback exited ${rb.status}: ${rb.stderr.trim().split('\n').at(-1)}`);
    const back = await two.graph.getState(two.config);
    if (JSON.stringify(back.values.messages) !== JSON.stringify(two.prior)) problems.push('two: rollback did not restore the prior list');
    seen.push(`two: rollback exit ${rb.status}, ${back.values.messages.length} messages`);
  } finally {
    await saver.end();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
  return { summary: seen.join('; '), problems };
}

// verdict sends the messages and a new question to the (stubbed) provider and checks the
// request with tmend's provider rules; a conversion that throws is a rejection too.
async function verdict(h, model, s, messages) {
  const before = s.seen.length;
  try {
    await model().invoke([...messages, new HumanMessage('And tomorrow?')]);
  } catch (e) {
    return { clean: false, why: `@langchain/anthropic throws: ${e.message.split('\n')[0]}` };
  }
  const c = h.providerCheck('anthropic', s.seen[before].body.messages);
  return { clean: c.clean, why: c.issues.join(', ') };
}

function unansweredCalls(msgs) {
  const answered = new Set(msgs.filter((m) => ToolMessage.isInstance(m)).map((m) => m.tool_call_id));
  return msgs.filter((m) => AIMessage.isInstance(m)).flatMap((m) => (m.tool_calls ?? []).map((c) => c.id)).filter((id) => !answered.has(id));
}
