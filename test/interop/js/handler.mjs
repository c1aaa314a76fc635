// The official A2A JavaScript SDK (@a2a-js/sdk, pinned in package.json) as an
// upstream skill handler behind capgate: its server side (DefaultRequestHandler,
// InMemoryTaskStore, an AgentExecutor) served with its express JSON-RPC and
// HTTP+JSON handlers on 127.0.0.1. test/interop runs it:
//
//   node handler.mjs <calls file>
//
// It listens on a port the kernel chooses and prints one line,
// '@@handler {"jsonrpc": <URL>, "rest": <URL>}'. Every request it receives is
// appended to <calls file> as one JSON line before the SDK handles it:
// {binding, method, authorization, version, decisionId, callerAuthorization, jose}, so the test can
// verify the token capgate sent with every call.
//
// Each line the test writes on stdin, {"jwks": <URL>, "issuer": ..., "audiences": [...]},
// makes the handler verify capgate's token as a handler would, with jose (a
// verifier capgate does not share) against capgate's JWKS; it answers
// '@@configured'. A verified token is the SDK's user (tenant/subject: the SDK's
// task store scopes tasks by it) and its claims are recorded as "jose"; a
// refused one is answered HTTP 401 with JSON-RPC error -31401 without reaching
// the SDK. Before the first such line every request is let through.
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

const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const card = {
    name: 'JS handler',
    description: '@a2a-js/sdk behind capgate',
    version: '1.0.0',
    supportedInterfaces: [
      { url: `${base}/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
      // capgate calls a handler in its caller's A2A version: 0.3 callers'
      // calls reach the SDK's 0.3 compatibility layer (legacyCompat).
      { url: `${base}/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '0.3', tenant: '' },
      { url: `${base}/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0', tenant: '' },
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
  // verify records each request, checking its token once the test has
  // configured a verifier.
  const verify = (binding) => async (req, res, next) => {
    const line = {
      binding,
      method: binding === 'JSONRPC' ? req.body?.method ?? '' : `${req.method} ${req.path}`,
      authorization: req.get('authorization') ?? '',
      version: req.get('a2a-version') ?? '',
      decisionId: req.get('x-capgate-decision-id') ?? '',
      // capgate sends the caller's own credential only when configured to
      // (identity.forward_caller_token).
      callerAuthorization: req.get('x-capgate-caller-authorization') ?? '',
    };
    const v = verifier;
    if (v) {
      try {
        const token = line.authorization.replace(/^Bearer /i, '');
        const { payload } = await jose.jwtVerify(token, v.jwks, { issuer: v.issuer, audience: v.audiences, algorithms: ['ES256', 'RS256'] });
        req.capgate = payload;
        line.jose = { ok: true, sub: payload.sub, tenant: payload.tenant, aud: payload.aud, scope: payload.scope, capability: payload.capability };
      } catch (e) {
        line.jose = { ok: false, error: e.code ?? e.name };
      }
    }
    appendFileSync(callsFile, `${JSON.stringify(line)}\n`);
    if (line.jose && !line.jose.ok) {
      res.status(401).json({ jsonrpc: '2.0', id: req.body?.id ?? null, error: { code: -31401, message: 'capgate token refused' } });
      return;
    }
    next();
  };
  const userBuilder = async (req) =>
    req.capgate ? { isAuthenticated: true, userName: `${req.capgate.tenant ?? ''}/${req.capgate.sub}` } : UserBuilder.noAuthentication();
  app.use('/jsonrpc', express.json(), verify('JSONRPC'), jsonRpcHandler({ requestHandler: handler, userBuilder, legacyCompat: { enabled: true } }));
  app.use('/rest', verify('HTTP+JSON'), restHandler({ requestHandler: handler, userBuilder }));
  process.stdout.write(`@@handler ${JSON.stringify({ jsonrpc: `${base}/jsonrpc`, rest: `${base}/rest` })}\n`);
});

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
