// The official A2A JavaScript SDK (@a2a-js/sdk, pinned in package.json) discovering capgate from
// its card alone. test/interop runs it:
//
//   node card.mjs '<plan JSON>'
//
// plan: {base, token, steps: ["JSONRPC", "HTTP+JSON", "GRPC"]}. base is the URL the card names
// (capgate behind a TCP front at that address), so nothing is rewritten: the SDK's resolver
// reads the card, its client factory picks the interface of each transport and dials its URL
// as given (the gRPC transport hands it to grpc-js). The token goes in as the SDK expects it:
// a fetch wrapper for JSON-RPC and HTTP+JSON, a call interceptor (gRPC metadata) for gRPC; the
// SDK does not act on the card's security requirements itself, so the script reports what it
// parsed of them, from the public card and from the extended card its transport fetches. One line per step: '@@interop ' and {step, ok, result?, error?}.
import { Message, Task } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';

const plan = JSON.parse(process.argv[2]);

function emit(line) {
  console.log('@@interop ' + JSON.stringify(line));
}

function fetchWithToken(url, init = {}) {
  const headers = new Headers(init.headers);
  headers.set('Authorization', `Bearer ${plan.token}`);
  return fetch(url, { ...init, headers });
}

const bearer = {
  async before(args) {
    args.options.serviceParameters.authorization = `Bearer ${plan.token}`;
  },
  async after() {},
};

// requirements is what the SDK's parsed card says a caller must present: scheme names with
// their scopes, per card and per skill.
function requirements(list) {
  return (list ?? []).map((r) => Object.fromEntries(Object.entries(r.schemes ?? {}).map(([k, v]) => [k, v?.list ?? v])));
}

for (const transport of plan.steps) {
  let card;
  try {
    card = await new DefaultAgentCardResolver().resolve(plan.base);
    emit({
      step: `${transport}/card`,
      ok: true,
      result: {
        url: card.supportedInterfaces.find((i) => i.protocolBinding === transport)?.url,
        securityRequirements: requirements(card.securityRequirements),
        skillRequirements: Object.fromEntries(card.skills.map((s) => [s.id, requirements(s.securityRequirements)])),
      },
    });
  } catch (e) {
    emit({ step: `${transport}/card`, ok: false, error: { name: e?.name, message: String(e?.message ?? e) } });
    continue;
  }
  try {
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [
          new JsonRpcTransportFactory({ fetchImpl: fetchWithToken }),
          new RestTransportFactory({ fetchImpl: fetchWithToken }),
          new GrpcTransportFactory(),
        ],
        preferredTransports: [transport],
        clientConfig: transport === 'GRPC' ? { interceptors: [bearer] } : undefined,
      }),
    );
    const c = await factory.createFromAgentCard(card);
    if (c.transport.protocolName !== transport) throw new Error(`the SDK chose ${c.transport.protocolName}, not ${transport}`);
    const res = await c.sendMessage({
      tenant: '',
      message: Message.fromJSON({
        messageId: `js-${Math.random().toString(16).slice(2)}`,
        role: 'ROLE_USER',
        parts: [{ text: 'reconcile INV-20931 against its PO' }],
        metadata: { skillId: 'reconcile-invoice' },
      }),
    });
    emit({ step: `${transport}/send`, ok: true, result: { state: res.status ? Task.toJSON(res).status.state : 'message' } });
    const ext = await c.getAgentCard();
    emit({
      step: `${transport}/extendedCard`,
      ok: true,
      result: { skillRequirements: Object.fromEntries(ext.skills.map((s) => [s.id, requirements(s.securityRequirements)])) },
    });
  } catch (e) {
    emit({ step: `${transport}/send`, ok: false, error: { name: e?.name, message: String(e?.message ?? e) } });
  }
}
