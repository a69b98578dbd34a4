import { CaseFailure, type CaseRecord, type RunContext } from './context.js';
import { newMarketplaceId, type Exchange } from './http.js';

// Syntactically valid labels (gaps.md) that no real catalog should contain.
const UNKNOWN_PRODUCT = 'acceptance-unknown-product';
const UNKNOWN_PLAN = 'acceptance-unknown-plan';
const UNKNOWN_REGION = 'nowhere::acceptance-unknown';
const OTHER_PRODUCT = 'acceptance-other-product';
const OTHER_REGION = 'nowhere::acceptance-other';
const TEN_MINUTES = 10 * 60 * 1000;

function provisionBody(id: string, product: string, plan: string, region: string): Record<string, unknown> {
  return { id, product, plan, region, features: {} };
}

/** Provisioning: the new resource, its repeat, conflicts, faulty labels and the signature checks. */
export async function provisionFeature(ctx: RunContext): Promise<void> {
  const { client, settings, state } = ctx;
  const id = newMarketplaceId();
  const body = provisionBody(id, settings.product, settings.plan, settings.region);

  const created = await ctx.run('provision.new', async (record) => {
    const callback = ctx.callback(newMarketplaceId());
    const exchange = record.saw(await client.send('PUT', `/v1/resources/${id}`, body, { callback }));
    await ctx.expectSuccess(record, exchange, { statuses: [201, 204], callbackId: callback.id, credentials: false, messageRequired: exchange.status === 201 });
  });
  if (created) state.resourceId = id;

  const needResource = ['provision.repeat', 'provision.conflict-plan', 'provision.conflict-product', 'provision.conflict-region'] as const;
  if (!created) {
    for (const caseId of needResource) ctx.skip(caseId, 'needs the resource that "provisions a new resource" failed to create');
  } else {
    await ctx.run('provision.repeat', async (record) => {
      const callback = ctx.callback(newMarketplaceId());
      const exchange = record.saw(await client.send('PUT', `/v1/resources/${id}`, body, { callback }));
      if (exchange.status === 409) throw new CaseFailure('answered 409 to a repeat with the same product, plan and region; PUT is idempotent: a repeat must succeed like the first request');
      await ctx.expectSuccess(record, exchange, { statuses: [201, 204], callbackId: callback.id, credentials: false });
    });

    await ctx.run('provision.conflict-plan', async (record) => {
      const other = settings.newPlan ?? UNKNOWN_PLAN;
      const exchange = record.saw(await client.send('PUT', `/v1/resources/${id}`, provisionBody(id, settings.product, other, settings.region), { callback: ctx.callback(newMarketplaceId()) }));
      conflict(ctx, record, exchange, settings.newPlan !== undefined, `plan ${other}`, '--new-plan');
    });

    await ctx.run('provision.conflict-product', async (record) => {
      const other = settings.conflictProduct ?? OTHER_PRODUCT;
      const exchange = record.saw(await client.send('PUT', `/v1/resources/${id}`, provisionBody(id, other, settings.plan, settings.region), { callback: ctx.callback(newMarketplaceId()) }));
      conflict(ctx, record, exchange, settings.conflictProduct !== undefined, `product ${other}`, '--conflict-product');
    });

    await ctx.run('provision.conflict-region', async (record) => {
      const other = settings.conflictRegion ?? OTHER_REGION;
      const exchange = record.saw(await client.send('PUT', `/v1/resources/${id}`, provisionBody(id, settings.product, settings.plan, other), { callback: ctx.callback(newMarketplaceId()) }));
      conflict(ctx, record, exchange, settings.conflictRegion !== undefined, `region ${other}`, '--conflict-region');
    });
  }

  const faulty = [
    ['provision.faulty-product', provisionBody('', UNKNOWN_PRODUCT, settings.plan, settings.region), `product ${UNKNOWN_PRODUCT}`],
    ['provision.faulty-plan', provisionBody('', settings.product, UNKNOWN_PLAN, settings.region), `plan ${UNKNOWN_PLAN}`],
    ['provision.faulty-region', provisionBody('', settings.product, settings.plan, UNKNOWN_REGION), `region ${UNKNOWN_REGION}`],
  ] as const;
  // A refusal of a faulty request proves something only if the valid request was accepted.
  const provisionAccepted = { provesNothingIf: ctx.unlessAnswered('provision.new') };
  for (const [caseId, template, what] of faulty) {
    await ctx.run(caseId, async (record) => {
      const fresh = newMarketplaceId();
      const exchange = record.saw(await client.send('PUT', `/v1/resources/${fresh}`, { ...template, id: fresh }, { callback: ctx.callback(newMarketplaceId()) }));
      ctx.expectRefusal(exchange, [400], `an unknown ${what} is refused with 400`);
    }, provisionAccepted);
  }

  // Each signature case targets a fresh id with a valid body: only the signature is wrong.
  const signatureCases = [
    ['signature.missing', { unsigned: true }, 'a request without X-Signature is refused'],
    ['signature.bad', { signer: ctx.signers.rogue }, 'a live key endorsed by another master key is refused'],
    ['signature.stale-date', { signer: ctx.signers.stale }, 'a Date more than 5 minutes old is refused'],
    ['signature.future-date', { signer: ctx.signers.future }, 'a Date more than 5 minutes ahead is refused'],
  ] as const;
  for (const [caseId, options, why] of signatureCases) {
    await ctx.run(caseId, async (record) => {
      const fresh = newMarketplaceId();
      const exchange = record.saw(await client.send('PUT', `/v1/resources/${fresh}`, provisionBody(fresh, settings.product, settings.plan, settings.region), options));
      ctx.expectRefusal(exchange, [401], why);
    }, provisionAccepted);
  }
  await ctx.run('signature.tampered', async (record) => {
    const fresh = newMarketplaceId();
    const signed = provisionBody(fresh, settings.product, settings.plan, settings.region);
    const sent = { ...signed, plan: settings.newPlan ?? UNKNOWN_PLAN };
    const exchange = record.saw(await client.send('PUT', `/v1/resources/${fresh}`, sent, { signedBody: signed }));
    ctx.expectRefusal(exchange, [401], 'the signature covers the body bytes; a changed body is refused');
  }, provisionAccepted);
}

function conflict(ctx: RunContext, record: CaseRecord, exchange: Exchange, real: boolean, what: string, flag: string): void {
  if (real) {
    ctx.expectRefusal(exchange, [409], `the resource exists with other properties (${what}): 409 Conflict`);
    return;
  }
  ctx.expectRefusal(exchange, [409, 400], `the resource exists with other properties (${what}): 409 Conflict`);
  // A 409 shows the provider compared the properties; a 400 only that it does not know the made-up value.
  if (exchange.status === 400) {
    record.notChecked = `answered 400: ${what} is made up, so the provider refused it as unknown before comparing it with the existing resource; pass ${flag} with a second value from your catalog to check the conflict itself`;
  }
}

/** Credential provisioning: a new set, its repeat, and an unknown resource. */
export async function credentialsFeature(ctx: RunContext): Promise<void> {
  const { client, state } = ctx;
  const resourceId = state.resourceId;
  if (resourceId === undefined) {
    ctx.skip('credentials.new', 'needs a provisioned resource');
    ctx.skip('credentials.repeat', 'needs a provisioned resource');
  } else {
    const id = newMarketplaceId();
    const body = { id, resource_id: resourceId };
    let first: Record<string, string> | undefined;
    await ctx.run('credentials.new', async (record) => {
      const callback = ctx.callback(newMarketplaceId());
      const exchange = record.saw(await client.send('PUT', `/v1/credentials/${id}`, body, { callback }));
      first = await ctx.expectSuccess(record, exchange, { statuses: [201], callbackId: callback.id, credentials: true });
      state.credentialId = id;
      state.credentials = first;
    });
    if (first === undefined) {
      ctx.skip('credentials.repeat', 'needs the credential set that "provisions a credential set" failed to create');
    } else {
      const original = first;
      await ctx.run('credentials.repeat', async (record) => {
        const callback = ctx.callback(newMarketplaceId());
        const exchange = record.saw(await client.send('PUT', `/v1/credentials/${id}`, body, { callback }));
        if (exchange.status === 409) throw new CaseFailure('answered 409 to an identical repeat; PUT is idempotent: a repeat must succeed');
        const again = await ctx.expectSuccess(record, exchange, { statuses: [201, 204], callbackId: callback.id, credentials: exchange.status !== 204 });
        if (again === undefined) {
          record.notChecked = 'answered 204, which a repeat may, but with no credentials: whether a repeat returns the same credentials could not be compared';
          return;
        }
        if (!sameCredentials(original, again)) {
          throw new CaseFailure('the repeat returned other credentials than the first answer; a repeated request must get the same answer (section 7.3)');
        }
      });
    }
  }

  await ctx.run('credentials.unknown-resource', async (record) => {
    const id = newMarketplaceId();
    const exchange = record.saw(await client.send('PUT', `/v1/credentials/${id}`, { id, resource_id: newMarketplaceId() }, { callback: ctx.callback(newMarketplaceId()) }));
    ctx.expectRefusal(exchange, [404], 'credentials for a resource the provider does not have are refused with 404');
  }, { provesNothingIf: ctx.unlessAnswered('credentials.new') });
}

/** Rotation: swap (new set, then delete the old) or replace (delete the old, then a new set). */
export async function rotationFeature(ctx: RunContext): Promise<void> {
  const { client, state, settings } = ctx;
  const resourceId = state.resourceId;
  const oldId = state.credentialId;
  const oldValues = state.credentials;
  if (resourceId === undefined || oldId === undefined || oldValues === undefined) {
    ctx.skip('rotation.new-set', 'needs a provisioned credential set');
    ctx.skip('rotation.delete-old', 'needs a provisioned credential set');
    return;
  }
  const newId = newMarketplaceId();
  let created = false;
  const createNew = () => ctx.run('rotation.new-set', async (record) => {
    record.note = settings.credential === 'multiple' ? 'swap: the new set is created while the old one still exists' : 'replace: the new set is created after the old one was deleted';
    const callback = ctx.callback(newMarketplaceId());
    const exchange = record.saw(await client.send('PUT', `/v1/credentials/${newId}`, { id: newId, resource_id: resourceId }, { callback }));
    const values = await ctx.expectSuccess(record, exchange, { statuses: [201], callbackId: callback.id, credentials: true });
    created = true;
    state.credentialId = newId;
    state.credentials = values;
    if (values !== undefined && sameCredentials(values, oldValues)) throw new CaseFailure('the new credential set equals the old one; rotation must issue different credentials');
  });
  const deleteOld = () => ctx.run('rotation.delete-old', async (record) => {
    const callback = ctx.callback(newMarketplaceId());
    const exchange = record.saw(await client.send('DELETE', `/v1/credentials/${oldId}`, undefined, { callback }));
    await ctx.expectSuccess(record, exchange, { statuses: [204], callbackId: callback.id, credentials: false });
  });

  if (settings.credential === 'multiple') {
    await createNew();
    await deleteOld();
  } else {
    const deleted = await deleteOld();
    if (deleted) {
      state.credentialId = undefined;
      state.credentials = undefined;
    }
    await createNew();
  }
  if (!created && settings.credential === 'multiple') {
    state.credentialId = oldId;
    state.credentials = oldValues;
  }
}

/** Plan change: to the new plan, to an unknown plan, of an unknown resource. */
export async function planChangeFeature(ctx: RunContext): Promise<void> {
  const { client, state, settings } = ctx;
  const resourceId = state.resourceId;
  const newPlan = settings.newPlan;
  if (resourceId === undefined || newPlan === undefined) {
    const reason = resourceId === undefined ? 'needs a provisioned resource' : 'needs --new-plan';
    ctx.skip('plan-change.change', reason);
    ctx.skip('plan-change.faulty-plan', reason);
  } else {
    await ctx.run('plan-change.change', async (record) => {
      const callback = ctx.callback(newMarketplaceId());
      const exchange = record.saw(await client.send('PATCH', `/v1/resources/${resourceId}`, { plan: newPlan }, { callback }));
      await ctx.expectSuccess(record, exchange, { statuses: [200, 204], callbackId: callback.id, credentials: false });
      state.plan = newPlan;
    });
    await ctx.run('plan-change.faulty-plan', async (record) => {
      const exchange = record.saw(await client.send('PATCH', `/v1/resources/${resourceId}`, { plan: UNKNOWN_PLAN }, { callback: ctx.callback(newMarketplaceId()) }));
      ctx.expectRefusal(exchange, [400], `a change to the unknown plan ${UNKNOWN_PLAN} is refused with 400`);
    }, { provesNothingIf: ctx.unlessAnswered('plan-change.change') });
  }
  await ctx.run('plan-change.unknown-resource', async (record) => {
    const exchange = record.saw(await client.send('PATCH', `/v1/resources/${newMarketplaceId()}`, { plan: newPlan ?? settings.plan }, { callback: ctx.callback(newMarketplaceId()) }));
    ctx.expectRefusal(exchange, [404], 'PATCH of a resource the provider does not have answers 404');
  }, { provesNothingIf: ctx.unlessAnswered('plan-change.change') });
}

function monthStart(at: Date, offset: number): string {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + offset, 1)).toISOString().replace('.000Z', 'Z');
}

/** Usage report (gaps.md "Usage report"): the current month, a reversed period, an unknown resource. */
export async function measuresFeature(ctx: RunContext): Promise<void> {
  const { client, state } = ctx;
  const now = new Date();
  const start = monthStart(now, 0);
  const end = monthStart(now, 1);
  const resourceId = state.resourceId;
  const measuresAnswered = ctx.unlessAnswered('measures.period', (status) => status === 200 || status === 204);
  if (resourceId === undefined) {
    ctx.skip('measures.period', 'needs a provisioned resource');
    ctx.skip('measures.bad-period', 'needs a provisioned resource');
  } else {
    await ctx.run('measures.period', async (record) => {
      const exchange = record.saw(await client.send('GET', `/v1/resources/${resourceId}/measures?period_start=${start}&period_end=${end}`));
      if (exchange.status === 204) {
        if (exchange.text.length > 0) throw new CaseFailure('answered 204 with a body; a 204 has none');
        // Correct for a resource without usage, but the report's shape (the point of the case) was not seen.
        record.notChecked = 'answered 204 (no usage yet), which is allowed: the shape of a usage report (200) could not be checked, as the suite records no usage';
        return;
      }
      if (exchange.status !== 200) throw new CaseFailure(`answered ${exchange.status}; expected 200 with the totals, or 204 when there is no data yet`);
      checkMeasures(exchange.json, resourceId, start, end);
    });
    await ctx.run('measures.bad-period', async (record) => {
      const exchange = record.saw(await client.send('GET', `/v1/resources/${resourceId}/measures?period_start=${end}&period_end=${start}`));
      ctx.expectRefusal(exchange, [400], 'a period whose end is before its start is refused with 400');
    }, { provesNothingIf: measuresAnswered });
  }
  await ctx.run('measures.unknown-resource', async (record) => {
    const exchange = record.saw(await client.send('GET', `/v1/resources/${newMarketplaceId()}/measures?period_start=${start}&period_end=${end}`));
    ctx.expectRefusal(exchange, [404], 'usage of a resource the provider does not have answers 404');
  }, { provesNothingIf: measuresAnswered });
}

function checkMeasures(body: unknown, resourceId: string, start: string, end: string): void {
  if (typeof body !== 'object' || body === null) throw new CaseFailure('answered 200 without a JSON object');
  const b = body as Record<string, unknown>;
  if (b.resource_id !== resourceId) throw new CaseFailure(`"resource_id" is ${JSON.stringify(b.resource_id)}; expected ${JSON.stringify(resourceId)}`);
  for (const [field, value] of [['period_start', start], ['period_end', end]] as const) {
    if (typeof b[field] !== 'string' || Date.parse(b[field]) !== Date.parse(value)) throw new CaseFailure(`"${field}" is ${JSON.stringify(b[field])}; expected the requested ${value}`);
  }
  const measures = b.measures;
  if (typeof measures !== 'object' || measures === null || Array.isArray(measures)) throw new CaseFailure('"measures" is not an object of feature → integer total');
  for (const [feature, total] of Object.entries(measures)) {
    if (typeof total !== 'number' || !Number.isSafeInteger(total) || total < 0) throw new CaseFailure(`measure ${JSON.stringify(feature)} is ${JSON.stringify(total)}; totals are non-negative integers`);
  }
}

/**
 * The reason when an answer says single sign-on is not configured at the provider: 404 (or 501)
 * whose message names single sign-on and says it is not configured (the router's answer is
 * `404 {"message": "Single sign-on is not configured on this provider …"}`). Anything else,
 * a bare 404 included, is judged as an answer of a provider that has it.
 */
export function ssoNotConfigured(exchange: Pick<Exchange, 'status' | 'json' | 'text'>): string | undefined {
  if (exchange.status !== 404 && exchange.status !== 501) return undefined;
  const body = exchange.json;
  const message = typeof body === 'object' && body !== null && typeof (body as { message?: unknown }).message === 'string'
    ? (body as { message: string }).message
    : exchange.text.slice(0, 300);
  if (!/\b(single[ -]sign[ -]on|sso)\b/i.test(message)) return undefined;
  if (!/\bnot\s+(configured|enabled|supported|available|set\s+up)\b|\b(disabled|unsupported|unavailable)\b/i.test(message)) return undefined;
  return `GET /v1/sso answered ${exchange.status} ${JSON.stringify(message.length > 160 ? `${message.slice(0, 160)}…` : message)}: the provider has no single sign-on configured`;
}

/** Single sign-on through the fake connector: a real sign-in, a tampered resource_id, a reused code. */
export async function ssoFeature(ctx: RunContext): Promise<void> {
  const { client, connector, state, settings } = ctx;
  const ids = ['sso.sign-in', 'sso.tampered', 'sso.reused-code'] as const;
  const resourceId = state.resourceId;
  if (resourceId === undefined) {
    for (const id of ids) ctx.skip(id, 'needs a provisioned resource');
    return;
  }
  const required = settings.required.includes('sso');
  connector.addResource({ id: resourceId, product: settings.product, plan: state.plan, region: settings.region });
  const otherId = newMarketplaceId();
  // The tampered id names a resource that exists at the connector, just not one this code grants.
  connector.addResource({ id: otherId, product: settings.product, plan: state.plan, region: settings.region });
  const ssoUrl = (code: string, id: string) => {
    const url = client.urlOf('/v1/sso');
    url.search = `code=${encodeURIComponent(code)}&resource_id=${encodeURIComponent(id)}`;
    return url;
  };
  let absent: string | undefined;
  try {
    const firstCode = connector.issueSsoCode({ resourceId });
    await ctx.run('sso.sign-in', async (record) => {
      const exchange = record.saw(await client.browse(ssoUrl(firstCode, resourceId)));
      absent = ssoNotConfigured(exchange);
      if (absent !== undefined) {
        if (required) throw new CaseFailure(`${absent}, and --require sso (option "require") says it must`);
        record.skipped = `${absent} (--require sso makes this a failure)`;
        return;
      }
      const { status } = exchange;
      if (status >= 500) {
        throw new CaseFailure(`answered ${status}: could the provider reach the connector? It needs CONNECTOR_URL=${connector.url} and the client id and secret given here`);
      }
      if (status === 404) {
        throw new CaseFailure('answered 404; expected 303 (or 302) to the dashboard. If the provider has no single sign-on, answer 404 {"message": "Single sign-on is not configured …"} (the suite then skips these cases) or pass --exclude sso');
      }
      if (status !== 303 && status !== 302 && status !== 200) throw new CaseFailure(`answered ${status}; expected 303 (or 302) to the dashboard, or 200 with it`);
      if (status !== 200 && exchange.headers.get('location') === null) throw new CaseFailure(`answered ${status} without a Location header`);
      if (exchange.headers.getSetCookie().length === 0) throw new CaseFailure('no session cookie was set: the provider must create its own login session');
      const used = connector.resourceChecks.some((check) => check.id === resourceId && check.status === 200);
      if (!used) throw new CaseFailure('signed in without reading the resource at the connector: the provider must check the user\'s access to resource_id');
    });
    if (absent !== undefined) {
      const reason = `${absent}${required ? ', and --require sso says it must' : ' (--require sso makes this a failure)'}`;
      for (const id of ['sso.tampered', 'sso.reused-code'] as const) ctx.report(id, required ? 'failed' : 'skipped', reason);
      return;
    }
    // A refused sign-in proves nothing when a valid one is refused too.
    const signedIn = {
      provesNothingIf: () => (ctx.outcome('sso.sign-in')?.status === 'passed'
        ? undefined
        : 'refused as expected, but a valid sign-in failed too (sso.sign-in): a refusal proves nothing while every sign-in fails; fix sso.sign-in first'),
    };
    await ctx.run('sso.tampered', async (record) => {
      const code = connector.issueSsoCode({ resourceId });
      const exchange = record.saw(await client.browse(ssoUrl(code, otherId)));
      refused(exchange, 'the code grants another resource than resource_id names; the provider must check resource_id at the connector');
    }, signedIn);
    await ctx.run('sso.reused-code', async (record) => {
      const exchange = record.saw(await client.browse(ssoUrl(firstCode, resourceId)));
      refused(exchange, 'codes are single-use; the provider must exchange each one at the connector');
    }, signedIn);
  } finally {
    connector.removeResource(otherId);
  }
}

function refused(exchange: Exchange, why: string): void {
  const cookies = exchange.headers.getSetCookie().length;
  if (exchange.status < 400 || exchange.status >= 500) throw new CaseFailure(`answered ${exchange.status}${cookies > 0 ? ' and set a session cookie' : ''}; expected a 4xx refusal: ${why}`);
  if (cookies > 0) throw new CaseFailure(`answered ${exchange.status} but set a cookie; a refused sign-in creates no session`);
}

/** Cleanup: delete the credentials and the resource, each twice, and check credentials go with their resource. */
export async function cleanupFeature(ctx: RunContext, withCredentials: boolean): Promise<void> {
  const { client, state } = ctx;
  const resourceId = state.resourceId;
  const credentialId = state.credentialId;
  if (!withCredentials) {
    for (const id of ['cleanup.credential', 'cleanup.credential-again', 'cleanup.credentials-follow'] as const) ctx.skip(id, 'the credentials feature is excluded');
  } else if (credentialId === undefined) {
    ctx.skip('cleanup.credential', 'no credential set is left to delete');
    ctx.skip('cleanup.credential-again', 'no credential set is left to delete');
  } else {
    const deleted = await ctx.run('cleanup.credential', async (record) => {
      const callback = ctx.callback(newMarketplaceId());
      const exchange = record.saw(await client.send('DELETE', `/v1/credentials/${credentialId}`, undefined, { callback }));
      await ctx.expectSuccess(record, exchange, { statuses: [204], callbackId: callback.id, credentials: false });
    });
    if (deleted) {
      await ctx.run('cleanup.credential-again', async (record) => {
        const exchange = record.saw(await client.send('DELETE', `/v1/credentials/${credentialId}`, undefined, { callback: ctx.callback(newMarketplaceId()) }));
        ctx.expectRefusal(exchange, [404], 'deleting a credential set that is already deleted answers 404');
      });
    } else {
      ctx.skip('cleanup.credential-again', 'the first delete failed');
    }
  }
  if (resourceId === undefined) {
    for (const id of ['cleanup.resource', 'cleanup.resource-again'] as const) ctx.skip(id, 'needs a provisioned resource');
    if (withCredentials) ctx.skip('cleanup.credentials-follow', 'needs a provisioned resource');
    return;
  }

  // A credential set left attached, to see it go with its resource (rule 4 of section 4.3).
  let leftId: string | undefined;
  let leftProblem: { detail: string; exchange?: Exchange } | undefined;
  if (withCredentials) {
    const id = newMarketplaceId();
    const callback = ctx.callback(newMarketplaceId());
    // Made for cleanup.credentials-follow: a 202 here is owed to that case.
    ctx.workFor('cleanup.credentials-follow');
    let exchange: Exchange | undefined;
    try {
      exchange = await client.send('PUT', `/v1/credentials/${id}`, { id, resource_id: resourceId }, { callback });
      await ctx.expectSuccess({ saw: (e) => e }, exchange, { statuses: [201], callbackId: callback.id, credentials: true });
      leftId = id;
    } catch (err) {
      leftProblem = { detail: err instanceof Error ? err.message : 'failed', ...(exchange === undefined ? {} : { exchange }) };
    }
  }

  const gone = await ctx.run('cleanup.resource', async (record) => {
    const callback = ctx.callback(newMarketplaceId());
    const exchange = record.saw(await client.send('DELETE', `/v1/resources/${resourceId}`, undefined, { callback }));
    await ctx.expectSuccess(record, exchange, { statuses: [204], callbackId: callback.id, credentials: false });
  });
  if (!gone) {
    ctx.skip('cleanup.resource-again', 'the first deprovisioning failed');
    if (withCredentials) ctx.skip('cleanup.credentials-follow', 'the resource was not deprovisioned');
    return;
  }
  state.resourceId = undefined;
  await ctx.run('cleanup.resource-again', async (record) => {
    const exchange = record.saw(await client.send('DELETE', `/v1/resources/${resourceId}`, undefined, { callback: ctx.callback(newMarketplaceId()) }));
    ctx.expectRefusal(exchange, [404], 'deprovisioning a resource that is already gone answers 404');
  });
  if (!withCredentials) return;
  if (leftId === undefined) {
    if (ctx.outcome('credentials.new')?.status !== 'passed') {
      ctx.skip('cleanup.credentials-follow', `needs a credential set on the resource, and provisioning one failed as in credentials.new: ${leftProblem?.detail ?? 'unknown error'}`);
      return;
    }
    // The provider failed a credential provisioning it got right before: a failure, not a skip.
    const problem = leftProblem;
    await ctx.run('cleanup.credentials-follow', (record) => {
      if (problem?.exchange !== undefined) record.saw(problem.exchange);
      return Promise.reject(new CaseFailure(`provisioning the credential set this case deletes after the resource failed: ${problem?.detail ?? 'unknown error'}`));
    });
    return;
  }
  const left = leftId;
  await ctx.run('cleanup.credentials-follow', async (record) => {
    const exchange = record.saw(await client.send('DELETE', `/v1/credentials/${left}`, undefined, { callback: ctx.callback(newMarketplaceId()) }));
    ctx.expectRefusal(exchange, [404], 'deprovisioning a resource deprovisions its credentials too, so deleting one of them afterwards answers 404');
  }, {
    // A 404 here proves the credentials went with the resource only if deleting a live set works.
    provesNothingIf: () => {
      const deletes = (['cleanup.credential', 'rotation.delete-old'] as const).map((id) => ctx.outcome(id)?.response?.status);
      if (deletes.some((status) => status !== undefined && status >= 200 && status < 300)) return undefined;
      return 'refused as expected, but no DELETE of a live credential set succeeded in this run (cleanup.credential, rotation.delete-old): a 404 proves nothing while every delete fails';
    },
  });
}

function sameCredentials(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a).sort();
  const other = Object.keys(b).sort();
  return keys.length === other.length && keys.every((k, i) => k === other[i] && a[k] === b[k]);
}

/** A Date offset for the stale and future signers. */
export const DATE_SKEW_MS = TEN_MINUTES;
