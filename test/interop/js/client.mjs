// The official A2A JavaScript SDK (@a2a-js/sdk, pinned in package.json) as a
// client of a running capgate. test/interop runs it:
//
//   node client.mjs '<plan JSON>'
//
// plan: {base, jwks, token, transport: "JSONRPC" | "HTTP+JSON", steps: [...]}
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
import * as jose from 'jose';

const plan = JSON.parse(process.argv[2]);

// The SDK's verifier logs each failed signature with console.debug (on
// stdout); the steps report the outcome.
console.debug = () => {};

// The server's card names agent.url from its config; the test's capgate
// listens on a port the kernel chose, so the interfaces are pointed there
// (as the Go tests do for a2a-go).
function pointAt(card) {
  for (const i of card.supportedInterfaces ?? []) i.url = plan.base;
  return card;
}

function withToken(token) {
  return (url, init = {}) => {
    const headers = new Headers(init.headers);
    if (token) headers.set('Authorization', `Bearer ${token}`);
    return fetch(url, { ...init, headers });
  };
}

async function client(token) {
  const fetchImpl = withToken(token);
  const card = pointAt(await new DefaultAgentCardResolver().resolve(plan.base));
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
      preferredTransports: [plan.transport],
    }),
  );
  return factory.createFromAgentCard(card);
}

function v03Resolver() {
  return new DefaultAgentCardResolver({ path: '/.well-known/agent.json', legacyCompat: { enabled: true } });
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
    const card = pointAt(await new DefaultAgentCardResolver().resolve(plan.base));
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
        preferredTransports: [plan.transport],
      }),
    );
    const c = await factory.createFromAgentCard(card);
    try {
      const ext = await c.getAgentCard();
      return { retried, skills: ext.skills.map((s) => s.id) };
    } catch (e) {
      return { retried, error: describeError(e) };
    }
  },
  async v03Card() {
    // The SDK's 0.3 compatibility: the 0.3 card path, translated to 1.0.
    const card = await v03Resolver().resolve(plan.base);
    return {
      skills: card.skills.map((s) => s.id),
      interfaces: card.supportedInterfaces.map((i) => `${i.protocolBinding} ${i.protocolVersion}`),
    };
  },
  async v03Send() {
    const fetchImpl = withToken(plan.token);
    const card = pointAt(await v03Resolver().resolve(plan.base));
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [
          new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } }),
          new RestTransportFactory({ fetchImpl, legacyCompat: { enabled: true } }),
        ],
        preferredTransports: [plan.transport],
      }),
    );
    const c = await factory.createFromAgentCard(card);
    const res = await c.sendMessage({ message: message('What is the status of invoice INV-20931?', 'lookup-invoice') });
    return { version: c.protocolVersion, kind: res.status ? 'task' : 'message', state: res.status ? Task.toJSON(res).status.state : '' };
  },
  async send() {
    const c = await client(plan.token);
    const res = await c.sendMessage({ message: message('What is the status of invoice INV-20931?', 'lookup-invoice') });
    if (!res.status) return { kind: 'message' };
    state.completed = res.id;
    return { kind: 'task', state: Task.toJSON(res).status.state, artifacts: res.artifacts.length };
  },
  async stream() {
    const c = await client(plan.token);
    const kinds = [];
    let last;
    for await (const ev of c.sendMessageStream({ message: message('What is the status of invoice INV-20931?', 'lookup-invoice') })) {
      kinds.push(ev.payload?.$case);
      if (ev.payload?.$case === 'task') last = Task.toJSON(ev.payload.value).status.state;
      if (ev.payload?.$case === 'statusUpdate') last = Task.toJSON({ id: '', status: ev.payload.value.status }).status.state;
    }
    return { events: kinds, final: last };
  },
  async clarify() {
    // No hint and an ambiguous request: capgate asks which capability is
    // meant, a task in TASK_STATE_INPUT_REQUIRED that capgate owns.
    const c = await client(plan.token);
    const res = await c.sendMessage({ message: message('hello there') });
    state.open = res.id;
    return { state: res.status ? Task.toJSON(res).status.state : 'message' };
  },
  async get() {
    if (!state.completed) throw new Error('no task from send');
    const c = await client(plan.token);
    const t = await c.getTask({ id: state.completed });
    return { id: t.id === state.completed, state: Task.toJSON(t).status.state };
  },
  async getUnknown() {
    const c = await client(plan.token);
    await c.getTask({ id: 'no-such-task' });
    return {};
  },
  async cancel() {
    if (!state.open) throw new Error('no open task from clarify');
    const c = await client(plan.token);
    const t = await c.cancelTask({ id: state.open });
    return { state: Task.toJSON(t).status.state };
  },
  async cancelCompleted() {
    if (!state.completed) throw new Error('no task from send');
    const c = await client(plan.token);
    await c.cancelTask({ id: state.completed });
    return {};
  },
  async list() {
    const c = await client(plan.token);
    // A full request: the SDK's JSON-RPC encoder sends an unset status as
    // "UNRECOGNIZED" (it compares to 0), which capgate rightly refuses.
    const res = await c.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 1, pageToken: '' });
    return { tasks: res.tasks.length, nextPageToken: res.nextPageToken !== '' };
  },
  async subscribe() {
    if (!state.completed) throw new Error('no task from send');
    const c = await client(plan.token);
    const kinds = [];
    for await (const ev of c.resubscribeTask({ id: state.completed })) kinds.push(ev.payload?.$case);
    return { events: kinds };
  },
};

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
