// A genuine A2A 0.3 client: @a2a-js/sdk 0.3.x (installed as a2a-js-sdk-03, pinned in
// package.json), as 0.3 fleets run it — not the 1.x SDK's 0.3 compatibility layer. test/interop
// runs it against a running capgate:
//
//   node client03.mjs '<plan JSON>'
//
// plan: {base, token, cardURL, path, transport: "JSONRPC" | "HTTP+JSON", steps: [...]}.
// The client discovers the agent itself (ClientFactory.createFromUrl at plan.path, "" for the
// SDK's default /.well-known/agent-card.json) and talks to the URLs the card names; the test's
// capgate listens on a port the kernel chose, so requests to the card's URL (plan.cardURL, the
// config's agent.url) are sent to plan.base by the fetch the SDK is given. It prints one line per
// step, '@@interop ' and {step, ok, result?, error?}.
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from 'a2a-js-sdk-03/client';

const plan = JSON.parse(process.argv[2]);

function report(step, ok, result, error) {
  const line = { step, ok };
  if (result !== undefined) line.result = result;
  if (error !== undefined) {
    line.error = { name: error?.constructor?.name ?? 'Error', message: String(error?.message ?? error) };
  }
  console.log('@@interop ' + JSON.stringify(line));
}

function fetchFor(token) {
  return (input, init = {}) => {
    let url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (plan.cardURL && url.startsWith(plan.cardURL)) url = plan.base + url.slice(plan.cardURL.length);
    const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
    if (token) headers.set('Authorization', `Bearer ${token}`);
    return fetch(url, { ...init, headers });
  };
}

function factory(token) {
  const f = fetchFor(token);
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: f }), new RestTransportFactory({ fetchImpl: f })],
      preferredTransports: [plan.transport],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: f }),
    }),
  );
}

function message(text, extra = {}) {
  return {
    kind: 'message',
    messageId: `m-${Math.random().toString(16).slice(2)}`,
    role: 'user',
    parts: [{ kind: 'text', text }],
    metadata: { skillId: 'lookup-invoice' },
    ...extra,
  };
}

const state = {};

const steps = {
  async discover() {
    const c = await factory(plan.token).createFromUrl(plan.base, plan.path || undefined);
    state.client = c;
    const card = await c.getAgentCard();
    return { protocolVersion: card.protocolVersion, preferredTransport: card.preferredTransport, skills: card.skills.map((s) => s.id) };
  },
  async send() {
    const r = await state.client.sendMessage({ message: message('Show me invoice INV-20931') });
    state.task = r.kind === 'task' ? r.id : r.taskId;
    return { kind: r.kind, id: state.task, state: r.status?.state };
  },
  async stream() {
    const kinds = [];
    for await (const ev of state.client.sendMessageStream({ message: message('Show me invoice INV-20931') })) {
      kinds.push(ev.kind);
    }
    return { kinds };
  },
  async get() {
    const t = await state.client.getTask({ id: state.task });
    return { kind: t.kind, id: t.id, state: t.status.state };
  },
  async cancel() {
    const t = await state.client.cancelTask({ id: state.task });
    return { id: t.id, state: t.status.state };
  },
  async getUnknown() {
    return await state.client.getTask({ id: 'no-such-task' });
  },
  async streamAnonymous() {
    const c = await factory('').createFromUrl(plan.base, plan.path || undefined);
    const kinds = [];
    for await (const ev of c.sendMessageStream({ message: message('Show me invoice INV-20931') })) kinds.push(ev.kind);
    return { kinds };
  },
};

for (const name of plan.steps) {
  try {
    if (name !== 'discover' && !state.client) throw new Error('discovery failed; step not run');
    report(name, true, await steps[name]());
  } catch (e) {
    report(name, false, undefined, e);
  }
}
