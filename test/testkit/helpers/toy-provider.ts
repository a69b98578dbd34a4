/**
 * A small hand-written provider for the acceptance suite's own tests: correct by default, with one
 * switch per deliberate bug, so that each acceptance case can be shown to fail against a provider
 * that gets exactly that one thing wrong. Written without marketplaceRouter on purpose: it stands
 * for a provider in "another language", and its bugs are ones the router would never make.
 */
import { randomBytes } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { errorResponder, verifySignature } from '../../../src/index.js';

export interface ToyBugs {
  /** No signature verification at all. */
  skipSignature: boolean;
  /** Verifies the signature but accepts any Date. */
  ignoreDate: boolean;
  /** Refuses old Dates but accepts ones in the future. */
  acceptFutureDate: boolean;
  /** Answers 201 to a PUT of an existing resource whatever its properties. */
  conflictCreates: boolean;
  /** Compares only product and plan on a repeated PUT. */
  ignoreRegionInCompare: boolean;
  /** Accepts any product, plan and region (also on plan change). */
  noCatalogCheck: boolean;
  /** Answers 409 to an identical repeat. */
  repeatConflicts: boolean;
  /** An identical credential repeat gets freshly generated values. */
  credentialRepeatNewValues: boolean;
  /** Creates credentials for resources it does not have. */
  credentialUnknownResource201: boolean;
  /** Credentials derive from the resource id only, so a rotation returns the same ones. */
  sameCredentialsOnRotation: boolean;
  /** Credential keys are not environment-variable names. */
  badCredentialKeys: boolean;
  /** DELETE of a credential answers 200 with a body instead of 204. */
  credentialDelete200: boolean;
  /** PATCH of an unknown resource answers 200. */
  patchUnknown200: boolean;
  /** Measures totals are strings. */
  measuresWrongShape: boolean;
  /** Measures of an unknown resource answer 204. */
  measuresUnknownEmpty: boolean;
  /** Measures accept a period that ends before it starts. */
  measuresNoPeriodCheck: boolean;
  /** SSO exchanges the code but never checks resource_id at the connector. */
  ssoNoResourceCheck: boolean;
  /** SSO signs anyone in without asking the connector. */
  ssoNoExchange: boolean;
  /** SSO redirects to the dashboard without creating a session. */
  ssoNoCookie: boolean;
  /** Repeated deletes answer 204 instead of 404. */
  deleteAgain204: boolean;
  /** Deprovisioning a resource leaves its credentials. */
  resourceDeleteKeepsCredentials: boolean;
  /** Async mode: answers 202 and never calls back. */
  asyncNoCallback: boolean;
  /** Async mode: the plan change callback carries credentials. */
  asyncCredentialsOnPlanChange: boolean;
  /** Async mode: deprovisioning completes with an "error" callback. */
  asyncErrorOnDeprovision: boolean;
  /** Async mode: validation errors answer 202, then an "error" callback. */
  async202ForErrors: boolean;
  /** With `keepToken`: a callback refused with 401 is given up, not retried with a new token. */
  noRetryOn401: boolean;
  /** No /v1/sso route at all: the framework's bare (HTML) 404, which says nothing about single sign-on. */
  noSsoRoute: boolean;
  /** No credential routes: a JSON 404 for every request to /v1/credentials/:id. */
  noCredentialRoutes: boolean;
  /** An identical credential repeat answers 204 (allowed), so nothing can be compared. */
  credentialRepeat204: boolean;
  /** Measures of a known resource answer 204 (no usage: allowed). */
  measuresNoUsage: boolean;
  /** Every credential DELETE answers 404, live sets included. */
  credentialDelete404: boolean;
}

export const TOY_CATALOG: Record<string, { plans: string[]; regions: string[] }> = {
  widgets: { plans: ['basic', 'premium'], regions: ['aws::us-east-1', 'all::global'] },
  gadgets: { plans: ['basic', 'premium'], regions: ['aws::us-east-1', 'all::global'] },
};

export interface ToyOptions {
  masterKey: string;
  connectorUrl: string;
  clientId: string;
  clientSecret: string;
  async?: boolean;
  bugs?: Partial<ToyBugs>;
  /**
   * Keep the client_credentials token for every callback (as a real connector client does) instead
   * of fetching one per callback; on a 401, fetch a new one and send the callback again.
   */
  keepToken?: boolean;
  /** With `keepToken`: the token held from the start, e.g. one kept from an earlier run. */
  initialToken?: string;
}

interface Resource {
  product: string;
  plan: string;
  region: string;
}

export function createToyProvider(options: ToyOptions): express.Express {
  const bugs: Partial<ToyBugs> = options.bugs ?? {};
  const resources = new Map<string, Resource>();
  const credentials = new Map<string, { resourceId: string; values: Record<string, string> }>();
  const sessions = new Set<string>();
  const app = express();

  const basic = `Basic ${Buffer.from(`${options.clientId}:${options.clientSecret}`).toString('base64')}`;

  let kept = options.keepToken === true ? options.initialToken : undefined;
  const newToken = (): Promise<string> => fetch(`${options.connectorUrl}/v1/oauth/tokens`, {
    method: 'POST',
    headers: { authorization: basic, 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials' }),
  }).then(async (r) => ((await r.json()) as { access_token: string }).access_token);

  async function callback(req: Request, payload: Record<string, unknown>): Promise<void> {
    const url = req.get('x-callback-url');
    if (url === undefined || bugs.asyncNoCallback === true) return;
    const put = (token: string) => fetch(url, { method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(payload) });
    if (options.keepToken !== true) {
      await put(await newToken());
      return;
    }
    kept ??= await newToken();
    const answer = await put(kept);
    if (answer.status !== 401 || bugs.noRetryOn401 === true) return;
    kept = await newToken();
    await put(kept);
  }

  /** Answers 202 now and runs `finish` shortly after, reporting its outcome through the callback. */
  function later(req: Request, res: Response, finish: () => Record<string, unknown>): void {
    res.status(202).json({ message: 'Working on it' });
    setTimeout(() => {
      callback(req, finish()).catch(() => undefined);
    }, 20);
  }

  function refuse(req: Request, res: Response, status: number, message: string): void {
    if (options.async === true && bugs.async202ForErrors === true && status === 400) {
      later(req, res, () => ({ state: 'error', message }));
      return;
    }
    res.status(status).json({ message });
  }

  function newValues(resourceId: string): Record<string, string> {
    const key = bugs.badCredentialKeys === true ? 'widget-url' : 'WIDGET_URL';
    const secret = bugs.sameCredentialsOnRotation === true ? `fixed-${resourceId}` : randomBytes(12).toString('hex');
    return { [key]: `https://user:${secret}@widgets.example/${resourceId}` };
  }

  const verified = ['/v1/resources', '/v1/credentials'];
  if (bugs.skipSignature === true) {
    app.use(verified, express.json());
  } else {
    const tolerant = bugs.ignoreDate === true || bugs.acceptFutureDate === true;
    app.use(verified, verifySignature({ masterKey: options.masterKey, logger: false, ...(tolerant ? { toleranceMs: 10 * 365 * 24 * 3600 * 1000 } : {}) }));
    if (bugs.acceptFutureDate === true) {
      app.use(verified, (req: Request, res: Response, next: NextFunction) => {
        if (Date.now() - Date.parse(req.get('date') ?? '') > 5 * 60 * 1000) {
          res.status(401).json({ message: 'Stale request' });
          return;
        }
        next();
      });
    }
  }

  const inCatalog = (product: string, plan?: string, region?: string): boolean => {
    if (bugs.noCatalogCheck === true) return true;
    const entry = TOY_CATALOG[product];
    return entry !== undefined && (plan === undefined || entry.plans.includes(plan)) && (region === undefined || entry.regions.includes(region));
  };

  app.put('/v1/resources/:id', (req, res) => {
    const id = req.params.id;
    const body = req.body as { id?: string; product?: string; plan?: string; region?: string };
    if (body.id !== id || typeof body.product !== 'string' || typeof body.plan !== 'string' || typeof body.region !== 'string') {
      res.status(400).json({ message: 'Invalid body' });
      return;
    }
    const existing = resources.get(id);
    if (existing !== undefined) {
      const same = existing.product === body.product && existing.plan === body.plan && (bugs.ignoreRegionInCompare === true || existing.region === body.region);
      if (bugs.conflictCreates === true || (same && bugs.repeatConflicts !== true)) res.status(201).json({ message: 'Widget ready' });
      else res.status(409).json({ message: 'Widget exists with other properties' });
      return;
    }
    if (!inCatalog(body.product)) return refuse(req, res, 400, 'Unknown product');
    if (!inCatalog(body.product, body.plan)) return refuse(req, res, 400, 'Unknown plan');
    if (!inCatalog(body.product, body.plan, body.region)) return refuse(req, res, 400, 'Unknown region');
    resources.set(id, { product: body.product, plan: body.plan, region: body.region });
    if (options.async === true) later(req, res, () => ({ state: 'done', message: 'Widget ready' }));
    else res.status(201).json({ message: 'Widget ready' });
  });

  app.patch('/v1/resources/:id', (req, res) => {
    const resource = resources.get(req.params.id);
    const plan = (req.body as { plan?: string }).plan;
    if (resource === undefined) {
      if (bugs.patchUnknown200 === true) res.status(200).json({ message: 'Resized' });
      else res.status(404).json({ message: 'No such widget' });
      return;
    }
    if (typeof plan !== 'string' || !inCatalog(resource.product, plan)) return refuse(req, res, 400, 'Unknown plan');
    resource.plan = plan;
    if (options.async === true) {
      later(req, res, () => ({ state: 'done', message: 'Resized', ...(bugs.asyncCredentialsOnPlanChange === true ? { credentials: { WIDGET_URL: 'x' } } : {}) }));
    } else {
      res.status(200).json({ message: 'Resized' });
    }
  });

  app.delete('/v1/resources/:id', (req, res) => {
    const id = req.params.id;
    if (!resources.delete(id)) {
      if (bugs.deleteAgain204 === true) res.status(204).end();
      else res.status(404).json({ message: 'No such widget' });
      return;
    }
    if (bugs.resourceDeleteKeepsCredentials !== true) {
      for (const [credentialId, credential] of credentials) if (credential.resourceId === id) credentials.delete(credentialId);
    }
    if (options.async === true) later(req, res, () => (bugs.asyncErrorOnDeprovision === true ? { state: 'error', message: 'Could not unravel' } : { state: 'done', message: 'Widget gone' }));
    else res.status(204).end();
  });

  app.get('/v1/resources/:id/measures', (req, res) => {
    const start = Date.parse(String(req.query.period_start));
    const end = Date.parse(String(req.query.period_end));
    if (Number.isNaN(start) || Number.isNaN(end) || (end <= start && bugs.measuresNoPeriodCheck !== true)) {
      res.status(400).json({ message: 'Bad period' });
      return;
    }
    if (!resources.has(req.params.id)) {
      if (bugs.measuresUnknownEmpty === true) res.status(204).end();
      else res.status(404).json({ message: 'No such widget' });
      return;
    }
    if (bugs.measuresNoUsage === true) {
      res.status(204).end();
      return;
    }
    res.json({ resource_id: req.params.id, period_start: req.query.period_start, period_end: req.query.period_end, measures: { 'widget-hours': bugs.measuresWrongShape === true ? '3' : 3 } });
  });

  if (bugs.noCredentialRoutes === true) {
    app.all('/v1/credentials/:id', (_req, res) => {
      res.status(404).json({ message: 'Not found' });
    });
  }

  app.put('/v1/credentials/:id', (req, res) => {
    const id = req.params.id;
    const body = req.body as { id?: string; resource_id?: string };
    if (body.id !== id || typeof body.resource_id !== 'string') {
      res.status(400).json({ message: 'Invalid body' });
      return;
    }
    const existing = credentials.get(id);
    if (existing !== undefined) {
      if (existing.resourceId !== body.resource_id) {
        res.status(409).json({ message: 'Credential exists for another widget' });
        return;
      }
      if (bugs.credentialRepeat204 === true) {
        res.status(204).end();
        return;
      }
      if (bugs.credentialRepeatNewValues === true) existing.values = newValues(body.resource_id);
      res.status(201).json({ message: 'Credentials ready', credentials: existing.values });
      return;
    }
    if (!resources.has(body.resource_id) && bugs.credentialUnknownResource201 !== true) {
      res.status(404).json({ message: 'No such widget' });
      return;
    }
    const values = newValues(body.resource_id);
    credentials.set(id, { resourceId: body.resource_id, values });
    if (options.async === true) later(req, res, () => ({ state: 'done', message: 'Credentials ready', credentials: values }));
    else res.status(201).json({ message: 'Credentials ready', credentials: values });
  });

  app.delete('/v1/credentials/:id', (req, res) => {
    if (bugs.credentialDelete404 === true || !credentials.delete(req.params.id)) {
      if (bugs.deleteAgain204 === true) res.status(204).end();
      else res.status(404).json({ message: 'No such credentials' });
      return;
    }
    if (bugs.credentialDelete200 === true) res.status(200).json({ message: 'Revoked' });
    else if (options.async === true) later(req, res, () => ({ state: 'done', message: 'Revoked' }));
    else res.status(204).end();
  });

  if (bugs.noSsoRoute !== true) app.get('/v1/sso', async (req, res) => {
    const code = String(req.query.code);
    const resourceId = String(req.query.resource_id);
    if (bugs.ssoNoExchange !== true) {
      const tokenAnswer = await fetch(`${options.connectorUrl}/v1/oauth/tokens`, {
        method: 'POST',
        headers: { authorization: basic, 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'authorization_code', code }),
      });
      if (tokenAnswer.status !== 201) {
        res.status(401).type('text').send('Sign-in link invalid');
        return;
      }
      const { access_token: token } = (await tokenAnswer.json()) as { access_token: string };
      if (bugs.ssoNoResourceCheck !== true) {
        const check = await fetch(`${options.connectorUrl}/v1/resources/${encodeURIComponent(resourceId)}`, { headers: { authorization: `Bearer ${token}` } });
        if (check.status !== 200) {
          res.status(403).type('text').send('No access');
          return;
        }
      }
    }
    if (bugs.ssoNoCookie !== true) {
      const sid = randomBytes(16).toString('hex');
      sessions.add(sid);
      res.setHeader('Set-Cookie', `toy.sid=${sid}; HttpOnly; Path=/; SameSite=Lax`);
    }
    res.redirect(303, `/dashboard/${encodeURIComponent(resourceId)}`);
  });

  app.use(verified, errorResponder());
  return app;
}
