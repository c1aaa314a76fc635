// The official A2A JavaScript SDK (@a2a-js/sdk, pinned in package.json) as an
// upstream skill handler behind capgate: its server side (DefaultRequestHandler,
// InMemoryTaskStore, an AgentExecutor) served on 127.0.0.1 over the three A2A
// 1.0 bindings, with the SDK's own transports: express jsonRpcHandler
// (JSON-RPC), express restHandler (HTTP+JSON) and grpcService on a grpc-js
// server (gRPC). test/interop runs it:
//
//   node handler.mjs <calls file>
//
// It listens on ports the kernel chooses and prints one line,
// '@@handler {"jsonrpc": <URL>, "rest": <URL>, "grpc": <URL>}' (grpc is
// http://127.0.0.1:<port>, the form capgate's handler config takes). Every
// request it receives is appended to <calls file> as one JSON line before the
// SDK handles it: {binding, method, authorization, version, decisionId,
// extensions, callerAuthorization, jose}, so the test can verify the token
// capgate sent with every call. method is the JSON-RPC method, the gRPC method name, or
// the HTTP method and path of an HTTP+JSON call ("GET /tasks/t-1"). On gRPC
// the headers are the call's metadata.
//
// Each line the test writes on stdin, {"jwks": <URL>, "issuer": ..., "audiences": [...]},
// makes the handler verify capgate's token as a handler would, with jose (a
// verifier capgate does not share) against capgate's JWKS; it answers
// '@@configured'. A verified token is the SDK's user (tenant/subject: the SDK's
// task store scopes tasks by it) and its claims are recorded as "jose"; a
// refused one never reaches the SDK and is answered in the binding's shape:
// JSON-RPC, HTTP 401 with error -31401; HTTP+JSON, HTTP 401 with a
// google.rpc.Status UNAUTHENTICATED body; gRPC, status UNAUTHENTICATED (16).
// Before the first such line every request is let through.
//
// The executor does what the message's text asks:
//   "mode:input"      a task in TASK_STATE_INPUT_REQUIRED (its execution stays
//                     open: subscribe and cancel reach it)
//   "mode:fail-first" an artifact update before any task: the SDK refuses the
//                     stream before it starts (UnsupportedOperationError); a
//                     unary call gets an internal error (no result)
//   "mode:fail-mid"   a task, an artifact, then a second task event: the SDK
//                     ends the stream with an error after those events
//   "mode:throw"      throws before publishing anything (the SDK turns it into a
//                     TASK_STATE_FAILED task)
//   "mode:message"    a message, no task
//   anything else     a task, one artifact, TASK_STATE_COMPLETED (on a task
//                     awaiting input too: the follow-up completes it)
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import express from 'express';
import * as jose from 'jose';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { A2AService, grpcService } from '@a2a-js/sdk/server/grpc';
import * as grpc from '@grpc/grpc-js';

const callsFile = process.argv[2];
if (!callsFile) {
  console.error('usage: node handler.mjs <calls file>');
  process.exit(2);
}

// The test reads only the '@@' lines on stdout; the SDK logs executor and
// stream failures with console.error, on stderr (the test shows it when it fails).
console.log = () => {};

const text = (parts) => parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join(' ');

const part = (value) => ({ content: { $case: 'text', value }, mediaType: 'text/plain', filename: '', metadata: {} });

function status(state, taskId, contextId) {
  return { taskId, contextId, status: { state, timestamp: new Date().toISOString() }, metadata: {} };
}

// contexts: task id → context id, for the cancel event.
const contexts = new Map();

const executor = {
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    contexts.set(taskId, contextId);
    const said = text(ctx.userMessage.parts);
    const task = (state) => ({
      id: taskId,
      contextId,
      status: { state, timestamp: new Date().toISOString() },
      history: ctx.task?.history ?? [ctx.userMessage], // the SDK has added the follow-up to a known task's history
      artifacts: [],
      metadata: {},
    });
    const artifact = {
      taskId,
      contextId,
      artifact: { artifactId: `a-${taskId}`, name: 'answer', description: '', parts: [part(`@a2a-js/sdk handled: ${said}`)], metadata: {}, extensions: [] },
      append: false,
      lastChunk: true,
      metadata: {},
    };
    if (said.includes('mode:message')) {
      bus.publish(AgentEvent.message({
        messageId: `m-${taskId}`, contextId, taskId: '', role: 2 /* ROLE_AGENT */,
        parts: [part(`@a2a-js/sdk says: ${said}`)], metadata: {}, extensions: [], referenceTaskIds: [],
      }));
      bus.finished();
      return;
    }
    if (said.includes('mode:throw')) {
      throw new Error('the executor gave up');
    }
    if (said.includes('mode:fail-first')) {
      bus.publish(AgentEvent.artifactUpdate(artifact));
      bus.finished();
      return;
    }
    if (said.includes('mode:input')) {
      // A blocking SendMessage returns at INPUT_REQUIRED only on a status
      // update; the execution (the event bus) stays open for subscribers.
      bus.publish(AgentEvent.task(task(2 /* TASK_STATE_WORKING */)));
      bus.publish(AgentEvent.statusUpdate(status(6 /* TASK_STATE_INPUT_REQUIRED */, taskId, contextId)));
      return;
    }
    bus.publish(AgentEvent.task(task(2 /* TASK_STATE_WORKING */)));
    bus.publish(AgentEvent.artifactUpdate(artifact));
    if (said.includes('mode:fail-mid')) {
      bus.publish(AgentEvent.task(task(2)));
      bus.finished();
      return;
    }
    bus.publish(AgentEvent.statusUpdate(status(3 /* TASK_STATE_COMPLETED */, taskId, contextId)));
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    bus.publish(AgentEvent.statusUpdate(status(5 /* TASK_STATE_CANCELED */, taskId, contexts.get(taskId) ?? '')));
    bus.finished();
  },
};

// verifier checks capgate's tokens once the test has said where its JWKS is.
let verifier;
const lines = createInterface({ input: process.stdin });
lines.on('line', (l) => {
  const cfg = JSON.parse(l);
  verifier = { jwks: jose.createRemoteJWKSet(new URL(cfg.jwks)), issuer: cfg.issuer, audiences: cfg.audiences };
  process.stdout.write('@@configured\n');
});
// The test closes stdin when it is done (or dies): stop then.
lines.on('close', () => process.exit(0));

// check appends one request to the calls file (header(name) reads its
// headers or metadata) and verifies its token once the test has configured a
// verifier. It returns the token's claims, or undefined when there is no
// verifier; it throws when the token is refused.
async function check(binding, method, header) {
  const line = {
    binding,
    method,
    authorization: header('authorization'),
    version: header('a2a-version'),
    decisionId: header('x-capgate-decision-id'),
    extensions: header('a2a-extensions'),
    // capgate sends the caller's own credential only when configured to
    // (identity.forward_caller_token).
    callerAuthorization: header('x-capgate-caller-authorization'),
  };
  const v = verifier;
  let claims;
  let refused;
  if (v) {
    try {
      const token = line.authorization.replace(/^Bearer /i, '');
      const { payload } = await jose.jwtVerify(token, v.jwks, { issuer: v.issuer, audience: v.audiences, algorithms: ['ES256', 'RS256'] });
      claims = payload;
      line.jose = { ok: true, sub: payload.sub, tenant: payload.tenant, aud: payload.aud, scope: payload.scope, capability: payload.capability };
    } catch (e) {
      line.jose = { ok: false, error: e.code ?? e.name };
      refused = new Error('capgate token refused');
    }
  }
  appendFileSync(callsFile, `${JSON.stringify(line)}\n`);
  if (refused) throw refused;
  return claims;
}

// A verified token is the SDK's user, on every binding (req.capgate for
// express, call.capgate for grpc-js).
const userBuilder = async (reqOrCall) =>
  reqOrCall.capgate ? { isAuthenticated: true, userName: `${reqOrCall.capgate.tenant ?? ''}/${reqOrCall.capgate.sub}` } : UserBuilder.noAuthentication();

// guardGRPC wraps each method of the SDK's gRPC service with the token check:
// a refused token is UNAUTHENTICATED before the SDK sees the call.
function guardGRPC(service) {
  const out = {};
  for (const [name, impl] of Object.entries(service)) {
    const def = A2AService[name];
    const method = def.path.slice(def.path.lastIndexOf('/') + 1);
    out[name] = async (call, callback) => {
      try {
        call.capgate = await check('GRPC', method, (k) => call.metadata.get(k).map(String).join(','));
      } catch (e) {
        const err = { code: grpc.status.UNAUTHENTICATED, details: e.message };
        if (def.responseStream) call.emit('error', err);
        else callback(err, null);
        return;
      }
      return impl(call, callback);
    };
  }
  return out;
}

const app = express();
const grpcServer = new grpc.Server();
const httpListening = new Promise((resolve) => {
  const server = app.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`));
});
const grpcListening = new Promise((resolve, reject) => {
  grpcServer.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(`http://127.0.0.1:${port}`)));
});
const [base, grpcURL] = await Promise.all([httpListening, grpcListening]);
const card = {
  name: 'JS handler',
  description: '@a2a-js/sdk behind capgate',
  version: '1.0.0',
  // The SDK's transports refuse an A2A-Version the card lists no interface
  // of that binding for (validateVersion).
  supportedInterfaces: [
    { url: `${base}/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
    // capgate calls a JSON-RPC handler in its caller's A2A version: 0.3
    // callers' calls reach the SDK's 0.3 compatibility layer (legacyCompat).
    { url: `${base}/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '0.3', tenant: '' },
    { url: `${base}/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0', tenant: '' },
    { url: grpcURL, protocolBinding: 'GRPC', protocolVersion: '1.0', tenant: '' },
  ],
  provider: undefined,
  capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [],
  signatures: [],
};
// No push notification is ever delivered: the test registers configs for
// webhooks that do not exist.
const sender = { send: async () => {} };
const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor, undefined, undefined, sender);
// verify is the express middleware in front of the SDK: it records the
// request and checks its token; refuse answers a refused one.
const verify = (binding, method, refuse) => async (req, res, next) => {
  try {
    req.capgate = await check(binding, method(req), (k) => req.get(k) ?? '');
  } catch (e) {
    refuse(req, res, e.message);
    return;
  }
  next();
};
app.use('/jsonrpc', express.json(), verify('JSONRPC', (req) => req.body?.method ?? '', (req, res, message) => {
  res.status(401).json({ jsonrpc: '2.0', id: req.body?.id ?? null, error: { code: -31401, message } });
}), jsonRpcHandler({ requestHandler: handler, userBuilder, legacyCompat: { enabled: true } }));
app.use('/rest', verify('HTTP+JSON', (req) => `${req.method} ${req.path}`, (req, res, message) => {
  res.status(401).json({ error: { code: 401, status: 'UNAUTHENTICATED', message, details: [] } });
}), restHandler({ requestHandler: handler, userBuilder }));
grpcServer.addService(A2AService, guardGRPC(grpcService({ requestHandler: handler, userBuilder })));
process.stdout.write(`@@handler ${JSON.stringify({ jsonrpc: `${base}/jsonrpc`, rest: `${base}/rest`, grpc: grpcURL })}\n`);
