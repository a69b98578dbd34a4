/**
 * A standard client library (oauth4webapi) drives the deprecated flow end to end: discovery from
 * the RFC 8414 metadata, an authorization request with PKCE (S256) and state, the code exchange
 * with HTTP Basic client authentication, UserInfo and a refresh.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import * as oauth from 'oauth4webapi';
import { deprecatedOAuthRouter } from '../../src/platform/index.js';
import { listen, type Running } from './helpers.js';

const CLIENT_ID = 'oauth4webapi-client-0123456789abcd';
const CLIENT_SECRET = 'oauth4webapi-secret-0123456789abcdef0123456789';
const REDIRECT_URI = 'https://marketplace.test/oauth/callback';
const ALICE = { sub: 'u-alice', name: 'Alice', email: 'alice@example.com' };

describe('deprecated OAuth flow driven by oauth4webapi', () => {
  let running: Running;
  before(async () => {
    const app = express();
    app.use(deprecatedOAuthRouter({
      clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUri: REDIRECT_URI }],
      getUser: (req) => (req.headers['x-signed-in'] === 'u-alice' ? ALICE : null),
      getUserById: (sub) => (sub === ALICE.sub ? ALICE : null),
      logger: false,
    }));
    running = await listen(app);
  });
  after(() => running.close());

  it('discovers, authorizes with PKCE, exchanges the code, reads UserInfo and refreshes', async () => {
    const insecure = { [oauth.allowInsecureRequests]: true };
    const issuer = new URL(running.url);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
    assert.deepEqual(as.code_challenge_methods_supported, ['S256', 'plain']);
    const client: oauth.Client = { client_id: CLIENT_ID };
    const clientAuth = oauth.ClientSecretBasic(CLIENT_SECRET);

    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const authorizationUrl = new URL(as.authorization_endpoint!);
    authorizationUrl.search = new URLSearchParams({
      client_id: CLIENT_ID,
      redirect_uri: REDIRECT_URI,
      response_type: 'code',
      scope: 'id email name',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    }).toString();
    // The browser leg: the signed-in user is redirected back to the marketplace without a prompt.
    const redirect = await fetch(authorizationUrl, { headers: { 'X-Signed-In': 'u-alice' }, redirect: 'manual' });
    assert.equal(redirect.status, 302);
    const callback = new URL(redirect.headers.get('location')!);
    const params = oauth.validateAuthResponse(as, client, callback, state);

    const tokenResponse = await oauth.authorizationCodeGrantRequest(as, client, clientAuth, params, REDIRECT_URI, verifier, insecure);
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, tokenResponse);
    assert.equal(tokens.token_type, 'bearer');
    assert.equal(tokens.scope, 'id email name');
    assert.ok(tokens.refresh_token);

    const info = await oauth.processUserInfoResponse(as, client, ALICE.sub, await oauth.userInfoRequest(as, client, tokens.access_token, insecure));
    assert.deepEqual({ ...info }, ALICE);

    const refreshed = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, clientAuth, tokens.refresh_token, insecure));
    assert.notEqual(refreshed.access_token, tokens.access_token);

    // The same code again: refused, and everything it produced is revoked.
    const replay = await oauth.authorizationCodeGrantRequest(as, client, clientAuth, params, REDIRECT_URI, verifier, insecure);
    await assert.rejects(oauth.processAuthorizationCodeResponse(as, client, replay), (error: unknown) => error instanceof oauth.ResponseBodyError && error.error === 'invalid_grant');
    const revoked = await oauth.userInfoRequest(as, client, refreshed.access_token, insecure);
    assert.equal(revoked.status, 401);
  });

  it('a wrong PKCE verifier is refused with invalid_grant', async () => {
    const insecure = { [oauth.allowInsecureRequests]: true };
    const issuer = new URL(running.url);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
    const client: oauth.Client = { client_id: CLIENT_ID };
    const verifier = oauth.generateRandomCodeVerifier();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({ client_id: CLIENT_ID, redirect_uri: REDIRECT_URI, response_type: 'code', code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' }).toString();
    const redirect = await fetch(url, { headers: { 'X-Signed-In': 'u-alice' }, redirect: 'manual' });
    const params = oauth.validateAuthResponse(as, client, new URL(redirect.headers.get('location')!), oauth.expectNoState);
    const response = await oauth.authorizationCodeGrantRequest(as, client, oauth.ClientSecretBasic(CLIENT_SECRET), params, REDIRECT_URI, oauth.generateRandomCodeVerifier(), insecure);
    await assert.rejects(oauth.processAuthorizationCodeResponse(as, client, response), (error: unknown) => error instanceof oauth.ResponseBodyError && error.error === 'invalid_grant');
  });
});
