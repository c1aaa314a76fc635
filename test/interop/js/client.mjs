// The official A2A JavaScript SDK (@a2a-js/sdk, pinned in package.json) as a
// client of a running capgate. test/interop runs it:
//
//   node client.mjs '<plan JSON>'
//
// plan: {base, jwks, token, otherToken, grpc, transport: "JSONRPC" | "HTTP+JSON" | "GRPC",
// steps: [...]}. grpc is the host:port of capgate's A2A listener (the card's gRPC interface is dns:///host:port).
// It prints one line per step, '@@interop ' and {step, ok, result?, error?}. A failing
// step does not stop the others; later steps that need an earlier result
// (a task id) report that they could not run.
import { Message, Task, verifyAgentCardSignature } from '@a2a-js/sdk';
import {
  createAuthenticatingFetchWithRetry,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import * as jose from 'jose';

const plan = JSON.parse(process.argv[2]);

// The SDK's verifier logs each failed signature with console.debug (on
// stdout); the steps report the outcome.
console.debug = () => {};

// The server's card names agent.url from its config; the test's capgate
// listens on a port the kernel chose, so the interfaces are pointed there
// (as the Go tests do for a2a-go), each in the card's own form: the gRPC
// interface is a gRPC target, dns:///host:port, which the SDK hands to grpc-js
// as given (card.mjs uses a card as served, unchanged).
function pointAt(card) {
  for (const i of card.supportedInterfaces ?? []) i.url = i.protocolBinding === 'GRPC' ? `dns:///${plan.grpc}` : plan.base;
  return card;
}

function withToken(token) {
  return (url, init = {}) => {
    const headers = new Headers(init.headers);
    if (token) headers.set('Authorization', `Bearer ${token}`);
    return fetch(url, { ...init, headers });
  };
}

// bearer sets the credential as a service parameter: an HTTP header for
// JSON-RPC and HTTP+JSON, gRPC metadata for gRPC (whose transport has no
// fetch to wrap).
function bearer(token) {
  return {
    async before(args) {
      if (token) args.options.serviceParameters.authorization = `Bearer ${token}`;
    },
    async after() {},
  };
}

function resolver(legacy) {
  return legacy
    ? new DefaultAgentCardResolver({ path: '/.well-known/agent.json', legacyCompat: { enabled: true } })
    : new DefaultAgentCardResolver();
}

// client is the SDK's client for plan.transport, from the 1.0 card or, with
// legacy, the 0.3 card and the SDK's 0.3 transports (legacyCompat).
async function client(token, { legacy = false, fetchImpl = withToken(token) } = {}) {
  const card = pointAt(await resolver(legacy).resolve(plan.base));
  const compat = legacy ? { legacyCompat: { enabled: true } } : {};
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [
        new JsonRpcTransportFactory({ fetchImpl, ...compat }),
        new RestTransportFactory({ fetchImpl, ...compat }),
        new GrpcTransportFactory({ ...compat }),
      ],
      preferredTransports: [plan.transport],
      clientConfig: plan.transport === 'GRPC' ? { interceptors: [bearer(token)] } : undefined,
    }),
  );
  const c = await factory.createFromAgentCard(card);
  if (c.transport.protocolName !== plan.transport) {
    throw new Error(`the SDK chose ${c.transport.protocolName}, not ${plan.transport}`);
  }
  return c;
}

function stateOf(task) {
  return Task.toJSON(task).status.state;
}

function message(text, skillId) {
  return Message.fromJSON({
    messageId: `js-${Math.random().toString(16).slice(2)}`,
    role: 'ROLE_USER',
    parts: [{ text }],
    metadata: skillId ? { skillId } : undefined,
  });
}

function sdkVerifier() {
  return verifyAgentCardSignature(async (kid) => {
    const { keys } = await (await fetch(plan.jwks)).json();
    const jwk = keys.find((k) => k.kid === kid);
    if (!jwk) throw new Error(`no key ${kid} in the JWKS`);
    return jose.importJWK(jwk, jwk.alg);
  });
}

async function refuses(verify, card) {
  try {
    await verify(card);
  } catch {
    return true;
  }
  return false;
}

function describeError(e) {
  return { name: e?.name, reason: e?.reason, message: String(e?.message ?? e) };
}

// Result lines carry a prefix: the SDK itself logs to stdout (console.debug).
const prefix = '@@interop ';
function emit(line) {
  console.log(prefix + JSON.stringify(line));
}

const state = {};
const steps = {
  async publicCard() {
    const card = await new DefaultAgentCardResolver().resolve(plan.base);
    return {
      name: card.name,
      skills: card.skills.map((s) => s.id),
      bindings: card.supportedInterfaces.map((i) => i.protocolBinding),
      extendedAgentCard: card.capabilities?.extendedAgentCard ?? false,
      signed: (card.signatures ?? []).length > 0,
    };
  },
  async verifyCard() {
    // The SDK's own verifier (its canonicalization: proto JSON round trip,
    // then JCS; jose's JWS check) over the card as served, with the key
    // from capgate's JWKS. One altered value must fail.
    const raw = await (await fetch(new URL('/.well-known/agent-card.json', plan.base))).json();
    const verify = sdkVerifier();
    await verify(raw);
    return { verified: true, alteredRefused: await refuses(verify, { ...raw, name: `${raw.name}!` }) };
  },
  async verifyParsedCard() {
    // The same verifier given the card as the SDK's resolver parsed it.
    const card = await new DefaultAgentCardResolver().resolve(plan.base);
    await sdkVerifier()(card);
    return { verified: true };
  },
  async extendedCard() {
    const c = await client(plan.token);
    const card = await c.getAgentCard();
    return { skills: card.skills.map((s) => s.id) };
  },
  async extendedCardNoAuth() {
    const c = await client('');
    const card = await c.getAgentCard();
    return { skills: card.skills.map((s) => s.id) };
  },
  async authRetry() {
    // The SDK's auth helper: no credential first, then retry with the token
    // when the answer asks for one. It looks at the HTTP status only.
    let retried = false;
    const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
      headers: async () => ({}),
      shouldRetryWithHeaders: async (_req, res) => {
        if (res.status !== 401) return undefined;
        retried = true;
        return { Authorization: `Bearer ${plan.token}` };
      },
    });
    const c = await client('', { fetchImpl });
    try {
      const ext = await c.getAgentCard();
      return { retried, skills: ext.skills.map((s) => s.id) };
    } catch (e) {
      return { retried, error: describeError(e) };
    }
  },
  async send() {
    const c = await client(plan.token);
    const res = await c.sendMessage({ message: message('What is the status of invoice INV-20931?', 'lookup-invoice') });
    if (!res.status) return { kind: 'message' };
    state.completed = res.id;
    return { kind: 'task', state: stateOf(res), artifacts: res.artifacts.length };
  },
  async stream() {
    return streamed(await client(plan.token));
  },
  async clarify() {
    // No hint and an ambiguous request: capgate asks which capability is
    // meant, a task in TASK_STATE_INPUT_REQUIRED that capgate owns.
    const c = await client(plan.token);
    const res = await c.sendMessage({ message: message('hello there') });
    state.open = res.id;
    return { state: res.status ? stateOf(res) : 'message' };
  },
  async get() {
    const c = await client(plan.token);
    const t = await c.getTask({ id: need('completed'), tenant: '' });
    return { id: t.id === state.completed, state: stateOf(t) };
  },
  async getUnknown() {
    const c = await client(plan.token);
    await c.getTask({ id: 'no-such-task', tenant: '' });
    return {};
  },
  async getOther() {
    // Another caller (same tenant and scopes) asks for this caller's task.
    const c = await client(plan.otherToken);
    await c.getTask({ id: need('completed'), tenant: '' });
    return {};
  },
  async getNoAuth() {
    const c = await client('');
    await c.getTask({ id: need('completed'), tenant: '' });
    return {};
  },
  async cancel() {
    const c = await client(plan.token);
    const t = await c.cancelTask({ id: need('open'), tenant: '' });
    return { state: stateOf(t) };
  },
  async cancelCompleted() {
    const c = await client(plan.token);
    await c.cancelTask({ id: need('completed'), tenant: '' });
    return {};
  },
  async list() {
    const c = await client(plan.token);
    // A full request: the SDK's JSON-RPC encoder sends an unset status as
    // "UNRECOGNIZED" (it compares to 0), which capgate rightly refuses.
    const res = await c.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 1, pageToken: '' });
    const next = await c.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 1, pageToken: res.nextPageToken });
    return {
      tasks: res.tasks.length,
      nextPageToken: res.nextPageToken !== '',
      secondPage: next.tasks.length,
      distinct: next.tasks[0]?.id !== res.tasks[0]?.id,
    };
  },
  async subscribe() {
    const c = await client(plan.token);
    const kinds = [];
    for await (const ev of c.resubscribeTask({ id: need('completed'), tenant: '' })) kinds.push(ev.payload?.$case);
    return { events: kinds };
  },
  async subscribeOpen() {
    // The clarification task capgate holds: one task event.
    const c = await client(plan.token);
    const kinds = [];
    for await (const ev of c.resubscribeTask({ id: need('open'), tenant: '' })) kinds.push(ev.payload?.$case);
    return { events: kinds };
  },
  async push() {
    return pushConfigs(await client(plan.token), need('completed'));
  },
  async pushRefused() {
    const c = await client(plan.token);
    await c.createTaskPushNotificationConfig(pushConfig(need('completed'), 'cfg-evil', 'https://evil.example.com/a2a'));
    return {};
  },
  async streamError() {
    // The handler (the test's) sends one event, then fails.
    return streamed(await client(plan.token), 'Reconcile invoice INV-1', 'reconcile-invoice');
  },

  // The SDK's 0.3 compatibility (legacyCompat): the 0.3 card path, read and
  // translated to 1.0, and its 0.3 transports.
  async v03Card() {
    const card = await resolver(true).resolve(plan.base);
    return {
      skills: card.skills.map((s) => s.id),
      interfaces: card.supportedInterfaces.map((i) => `${i.protocolBinding} ${i.protocolVersion}`),
    };
  },
  async v03Send() {
    const c = await client(plan.token, { legacy: true });
    const res = await c.sendMessage({ message: message('What is the status of invoice INV-20931?', 'lookup-invoice') });
    if (res.status) state.v03Completed = res.id;
    return { version: c.transport.protocolVersion, kind: res.status ? 'task' : 'message', state: res.status ? stateOf(res) : '', artifacts: res.artifacts?.length };
  },
  async v03Stream() {
    return streamed(await client(plan.token, { legacy: true }));
  },
  async v03Get() {
    const c = await client(plan.token, { legacy: true });
    const t = await c.getTask({ id: need('v03Completed'), historyLength: 1 });
    return { id: t.id === state.v03Completed, state: stateOf(t), artifacts: t.artifacts.length };
  },
  async v03GetUnknown() {
    const c = await client(plan.token, { legacy: true });
    await c.getTask({ id: 'no-such-task' });
    return {};
  },
  async v03Clarify() {
    const c = await client(plan.token, { legacy: true });
    const res = await c.sendMessage({ message: message('hello there') });
    state.v03Open = res.id;
    return { state: res.status ? stateOf(res) : 'message' };
  },
  async v03Cancel() {
    const c = await client(plan.token, { legacy: true });
    const t = await c.cancelTask({ id: need('v03Open') });
    return { state: stateOf(t) };
  },
  async v03ExtendedCard() {
    const c = await client(plan.token, { legacy: true });
    const card = await c.getAgentCard();
    return { skills: card.skills.map((s) => s.id) };
  },
  async v03Subscribe() {
    // The clarification task capgate holds, through the 0.3 transport.
    const c = await client(plan.token, { legacy: true });
    const kinds = [];
    for await (const ev of c.resubscribeTask({ id: need('v03Open') })) kinds.push(ev.payload?.$case);
    return { events: kinds };
  },
  async v03PushRefused() {
    const c = await client(plan.token, { legacy: true });
    await c.createTaskPushNotificationConfig(pushConfig(need('v03Completed'), 'cfg-evil', 'https://evil.example.com/a2a'));
    return {};
  },
  async v03Push() {
    return pushConfigs(await client(plan.token, { legacy: true }), need('v03Completed'));
  },
  async v03StreamError() {
    return streamed(await client(plan.token, { legacy: true }), 'Reconcile invoice INV-1', 'reconcile-invoice');
  },
};

// need returns a task id an earlier step stored.
function need(key) {
  if (!state[key]) throw new Error(`no ${key} task from an earlier step`);
  return state[key];
}

// streamed sends a streaming message and reports the events' kinds, the last
// state seen and, when the stream fails, the error after them.
async function streamed(c, text = 'What is the status of invoice INV-20931?', skill = 'lookup-invoice') {
  const kinds = [];
  let last;
  try {
    for await (const ev of c.sendMessageStream({ message: message(text, skill) })) {
      kinds.push(ev.payload?.$case);
      if (ev.payload?.$case === 'task') last = stateOf(ev.payload.value);
      if (ev.payload?.$case === 'statusUpdate') last = stateOf({ id: '', status: ev.payload.value.status });
    }
  } catch (e) {
    return { events: kinds, final: last, error: describeError(e) };
  }
  return { events: kinds, final: last };
}

function pushConfig(taskId, id, url) {
  return { tenant: '', taskId, id, url, token: 'hook-token', authentication: undefined };
}

// pushConfigs creates, reads, lists and deletes a push notification config
// on the task, and lists again.
async function pushConfigs(c, taskId) {
  const url = 'https://hooks.example.com/a2a';
  const created = await c.createTaskPushNotificationConfig(pushConfig(taskId, 'cfg-1', url));
  const got = await c.getTaskPushNotificationConfig({ tenant: '', taskId, id: 'cfg-1' });
  const listed = await c.listTaskPushNotificationConfig({ tenant: '', taskId, pageSize: 0, pageToken: '' });
  await c.deleteTaskPushNotificationConfig({ tenant: '', taskId, id: 'cfg-1' });
  let afterDelete;
  try {
    afterDelete = (await c.listTaskPushNotificationConfig({ tenant: '', taskId, pageSize: 0, pageToken: '' })).configs.length;
  } catch (e) {
    afterDelete = describeError(e);
  }
  return {
    created: { id: created.id, taskId: created.taskId === taskId, url: created.url },
    got: { id: got.id, url: got.url },
    listed: listed.configs.map((x) => x.id),
    afterDelete,
  };
}

for (const name of plan.steps) {
  const fn = steps[name];
  if (!fn) {
    emit({ step: name, ok: false, error: { message: 'unknown step' } });
    continue;
  }
  try {
    const result = await fn();
    emit({ step: name, ok: true, result });
  } catch (e) {
    emit({ step: name, ok: false, error: describeError(e) });
  }
}
