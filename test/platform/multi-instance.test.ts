/**
 * Two example-platform processes on one PostgreSQL database and schema behave as one: a code issued
 * by one is redeemed at the other, a replayed code or refresh token at either revokes everything
 * issued from that grant, 50 concurrent copies of one event delivery split across both reach the
 * handler once, and a flood of authorizations leaves a victim's tokens working. Needs DATABASE_URL
 * (CI sets it); without a server the tests report themselves skipped with the reason.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { DATABASE_URL, postgresSkipReason } from '../helpers/postgres.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const skip = await postgresSkipReason();
if (skip !== false) console.log(`platform multi-instance tests skipped: ${skip}`);

const CLIENT_ID = '5e0f1a2b3c4d5e6f708192a3b4c5d6e7';
const CLIENT_SECRET = 'c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00';
const CALLBACK = 'https://marketplace.test/oauth/callback';
const EVENTS_SECRET = 'events-secret-for-two-instances-0123';

interface Instance {
  url: string;
  child: ChildProcess;
  stdout(): string;
  stop(): Promise<void>;
}

const started = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of started) child.kill('SIGKILL');
});

/** Starts examples/platform.ts with `env` on a port the OS chooses; resolves once it listens. */
async function startPlatform(name: string, env: Record<string, string>): Promise<Instance> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'examples/platform.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', NODE_ENV: 'test', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.add(child);
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => {
    started.delete(child);
    resolve();
  }));
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (): void => {
      const match = /example platform listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (match?.[1] !== undefined) resolve(match[1]);
    };
    child.stdout.on('data', onData);
    void exited.then(() => reject(new Error(`${name} exited before listening: ${err.slice(-2000)}`)));
  });
  return {
    url,
    child,
    stdout: () => out,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Polls `check` until it holds or `timeoutMs` passes (log lines reach the pipe a little after the answer). */
async function eventually(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('two platform instances, one database', { skip }, () => {
  let a: Instance;
  let b: Instance;
  let schema: string;
  const admin = skip === false ? new pg.Pool({ connectionString: DATABASE_URL, max: 1 }) : undefined;

  before(async () => {
    schema = `em_platform_deploy_${randomBytes(5).toString('hex')}`;
    const env = {
      PLATFORM_ACCESS_TOKEN: 'platform-token-0123456789',
      OAUTH_CLIENT_ID: CLIENT_ID,
      OAUTH_CLIENT_SECRET: CLIENT_SECRET,
      MARKETPLACE_CALLBACK_URL: CALLBACK,
      SESSION_SECRET: 'shared-session-secret-0123456789',
      EVENTS_SECRET,
      DATABASE_URL: DATABASE_URL,
      DATABASE_SCHEMA: schema,
      // The handler holds on long enough that copies arrive while it runs, at both instances.
      EXAMPLE_EVENT_DELAY_MS: '300',
    };
    // Started together: the second migration waits on the advisory lock, then finds the schema done.
    [a, b] = await Promise.all([startPlatform('instance A', env), startPlatform('instance B', env)]);
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await admin?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin?.end();
  });

  /** Signs `user` in at `at` and returns the session cookie. */
  async function signIn(at: Instance, user: string): Promise<string> {
    const res = await fetch(`${at.url}/login?as=${user}`);
    assert.equal(res.status, 200);
    return (res.headers.get('set-cookie') ?? '').split(';')[0]!;
  }
  async function authorize(at: Instance, cookie: string): Promise<URL> {
    const query = new URLSearchParams({ client_id: CLIENT_ID, redirect_uri: CALLBACK, response_type: 'code', state: 'st' });
    const res = await fetch(`${at.url}/oauth/login?${query}`, { headers: { cookie }, redirect: 'manual' });
    assert.equal(res.status, 302);
    return new URL(res.headers.get('location')!);
  }
  async function token(at: Instance, fields: Record<string, string>): Promise<{ status: number; body: Record<string, string> }> {
    const res = await fetch(`${at.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64')}` },
      body: new URLSearchParams(fields).toString(),
    });
    return { status: res.status, body: (await res.json()) as Record<string, string> };
  }
  const redeem = (at: Instance, code: string) => token(at, { grant_type: 'authorization_code', code, redirect_uri: CALLBACK });
  const refresh = (at: Instance, refreshToken: string) => token(at, { grant_type: 'refresh_token', refresh_token: refreshToken });
  async function userInfo(at: Instance, accessToken: string): Promise<number> {
    return (await fetch(`${at.url}/oauth/userinfo`, { headers: { authorization: `Bearer ${accessToken}` } })).status;
  }
  async function newTokens(): Promise<Record<string, string>> {
    const code = (await authorize(a, await signIn(a, 'u-alice'))).searchParams.get('code')!;
    const res = await redeem(b, code);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  }

  it('a code issued by A is redeemed at B; its tokens work at both', async () => {
    const tokens = await newTokens();
    assert.equal(await userInfo(a, tokens.access_token!), 200);
    assert.equal(await userInfo(b, tokens.access_token!), 200);
    const renewed = await refresh(a, tokens.refresh_token!);
    assert.equal(renewed.status, 200);
    assert.equal(await userInfo(b, renewed.body.access_token!), 200);
  });

  it('a code replayed at the other instance revokes everything it produced', async () => {
    const code = (await authorize(a, await signIn(a, 'u-alice'))).searchParams.get('code')!;
    const first = await redeem(a, code);
    assert.equal(first.status, 200);
    const replay = await redeem(b, code);
    assert.equal(replay.body.error, 'invalid_grant');
    assert.equal(await userInfo(a, first.body.access_token!), 401);
    assert.equal(await userInfo(b, first.body.access_token!), 401);
    assert.equal((await refresh(a, first.body.refresh_token!)).body.error, 'invalid_grant');
  });

  it('concurrent redemptions of one code across both instances: at most one gets tokens, and none stay usable', async () => {
    const code = (await authorize(a, await signIn(a, 'u-alice'))).searchParams.get('code')!;
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => redeem(i % 2 === 0 ? a : b, code)));
    const winners = answers.filter((answer) => answer.status === 200);
    assert.ok(winners.length <= 1, `${winners.length} winners`);
    for (const winner of winners) {
      assert.equal(await userInfo(a, winner.body.access_token!), 401, 'revoked by the replays');
      assert.equal(await userInfo(b, winner.body.access_token!), 401);
    }
  });

  it('a refresh token replayed at either instance revokes everything issued from the grant, tokens issued later included', async () => {
    const tokens = await newTokens();
    const second = await refresh(b, tokens.refresh_token!);
    const third = await refresh(a, second.body.refresh_token!);
    assert.equal(third.status, 200);
    // The first refresh token again, though its retry grace has not passed: the client moved on, so it is a replay.
    assert.equal((await refresh(b, tokens.refresh_token!)).body.error, 'invalid_grant');
    assert.equal(await userInfo(a, third.body.access_token!), 401);
    assert.equal(await userInfo(b, second.body.access_token!), 401);
    assert.equal((await refresh(a, third.body.refresh_token!)).body.error, 'invalid_grant');
  });

  it('a refresh retried at the other instance within the grace period answers the same tokens', async () => {
    const tokens = await newTokens();
    const first = await refresh(a, tokens.refresh_token!);
    const retried = await refresh(b, tokens.refresh_token!);
    assert.equal(retried.status, 200);
    assert.equal(retried.body.access_token, first.body.access_token);
    assert.equal(retried.body.refresh_token, first.body.refresh_token);
    assert.equal(await userInfo(a, retried.body.access_token!), 200);
  });

  it('50 concurrent copies of one event delivery across both instances call the handler once', async () => {
    const resourceId = `res-${randomBytes(6).toString('hex')}`;
    const body = JSON.stringify({ event: 'resource:provisioned', version: 1, data: { resource_id: resourceId, subject: 't-acme' } });
    const send = (at: Instance) =>
      fetch(`${at.url}/v1/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-marketplace-event': 'resource:provisioned', 'x-marketplace-secret': EVENTS_SECRET },
        body,
      }).then(async (res) => ({ status: res.status, body: (await res.json()) as { message: string } }));
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => send(i % 2 === 0 ? a : b)));
    const statuses = new Set(answers.map((answer) => answer.status));
    for (const status of statuses) assert.ok(status === 200 || status === 503, `status ${status}`);
    assert.equal(answers.filter((answer) => answer.body.message === 'Event processed').length, 1);
    // The copies told to retry find it done.
    for (const [i, answer] of answers.entries()) {
      if (answer.status === 503) assert.deepEqual((await send(i % 2 === 0 ? a : b)).body, { message: 'Duplicate event; already processed' });
    }
    const handled = () => `${a.stdout()}${b.stdout()}`.split('\n').filter((line) => line.includes(resourceId) && line.includes('a resource was provisioned')).length;
    await eventually(() => handled() >= 1);
    assert.equal(handled(), 1);
    // A forged copy is refused and changes nothing.
    const forged = await fetch(`${b.url}/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-marketplace-event': 'resource:provisioned' }, body });
    assert.equal(forged.status, 401);
  });

  it('a flood of authorizations by one user at both instances leaves a victim’s tokens working', async () => {
    const victim = await newTokens();
    const attackerAtA = await signIn(a, 'u-bob');
    const attackerAtB = await signIn(b, 'u-bob');
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => authorize(i % 2 === 0 ? a : b, i % 2 === 0 ? attackerAtA : attackerAtB)));
    const refused = results.filter((location) => location.searchParams.get('error') === 'temporarily_unavailable').length;
    assert.ok(refused >= 150, `${refused} of 200 refused`);
    assert.equal(await userInfo(a, victim.access_token!), 200);
    assert.equal(await userInfo(b, victim.access_token!), 200);
    const renewed = await refresh(b, victim.refresh_token!);
    assert.equal(renewed.status, 200);
    assert.equal(await userInfo(a, renewed.body.access_token!), 200);
    // And the victim can still authorize afresh.
    assert.ok((await authorize(b, await signIn(b, 'u-alice'))).searchParams.get('code'));
  });
});
