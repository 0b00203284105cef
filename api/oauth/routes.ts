import express, { type NextFunction, type Request, type Response, Router } from 'express';
import type { Sql } from '../../db';
import {
  findUserByEmail,
  findUserEmail,
  listUserOrganizations,
  recordGrantOrganization,
} from '../../db/oauth';
import { endpoints } from '../../schemas/endpoints';
import { oauthRoutes } from '../../schemas/oauth';
import { notFound } from '../errors';
import { mount } from '../route';
import { verifyAgainstNothing, verifyPassword } from './passwords';
import { type AuthorizationServer, authorizationServerMetadata } from './server';
import type { SignInThrottle } from './throttle';

type Interaction = Awaited<
  ReturnType<Awaited<ReturnType<AuthorizationServer['provider']>>['interactionDetails']>
>;

const formBody = express.urlencoded({ extended: false, limit: '16kb' });

/** Scopes the consent page asks for: the missing resource scopes of the one resource. */
function requestedScopes(interaction: Interaction): { resource: string; scopes: string[] } {
  const missing = (interaction.prompt.details.missingResourceScopes ?? {}) as Record<string, string[]>;
  const [resource, scopes] = Object.entries(missing)[0] ?? [String(interaction.params.resource ?? ''), []];
  return { resource, scopes };
}

/**
 * The built-in authorization server's routes: oidc-provider answers the protocol endpoints,
 * these handlers the sign-in and consent pages. `server` is absent when the API trusts an
 * external issuer; then every route here is 404.
 */
export function authorizationServerRoutes(deps: {
  sql: Sql;
  server: AuthorizationServer | undefined;
  throttle: SignInThrottle;
}): Router {
  const { sql, server, throttle } = deps;
  const router = Router();
  const delegate = async (_input: unknown, req: Request, res: Response, next: NextFunction) => {
    if (!server) return next(notFound('endpoint'));
    await server.handle(req, res);
  };
  const pages = server?.pages;
  // Only called from routes that run once `server` exists (`interactionOf` answers first).
  const sendPage = (res: Response, status: number, html: string) => {
    res.status(status).set(pages!.headers).type('html').send(html);
  };
  /** The interaction the request's cookie names, or an error page (expired, no cookie). */
  async function interactionOf(req: Request, res: Response): Promise<Interaction | undefined> {
    try {
      return await (await server!.provider()).interactionDetails(req, res);
    } catch (err) {
      const description = err instanceof Error ? err.message : 'the sign-in expired';
      sendPage(
        res,
        400,
        pages!.error('interaction_expired', `${description}: start again from the application`),
      );
      return undefined;
    }
  }
  async function clientName(interaction: Interaction): Promise<string> {
    const client = await (await server!.provider()).Client.find(String(interaction.params.client_id));
    return client?.clientName ?? String(interaction.params.client_id);
  }
  async function renderConsent(res: Response, interaction: Interaction, status: number, error?: string) {
    const userId = String(interaction.session?.accountId);
    const email = await findUserEmail(sql, userId);
    sendPage(
      res,
      status,
      pages!.consent({
        action: `${oauthRoutes.interaction}/${interaction.uid}/consent`,
        clientName: await clientName(interaction),
        email: email ?? '',
        ...requestedScopes(interaction),
        organizations: await listUserOrganizations(sql, userId),
        error,
      }),
    );
  }

  mount(router, endpoints.oauthMetadata, (_input, _req, res, next) => {
    if (!server) return next(notFound('endpoint'));
    res.json(authorizationServerMetadata(server.settings.issuer));
  });
  mount(router, endpoints.oauthAuthorize, delegate);
  mount(router, endpoints.oauthAuthorizeResume, delegate);
  mount(router, endpoints.oauthToken, delegate);
  mount(router, endpoints.oauthRevoke, delegate);
  mount(router, endpoints.oauthJwks, delegate);

  mount(router, endpoints.oauthInteraction, async (_input, req, res, next) => {
    if (!server) return next(notFound('endpoint'));
    const interaction = await interactionOf(req, res);
    if (!interaction) return;
    if (interaction.prompt.name === 'login') {
      sendPage(
        res,
        200,
        pages!.signIn({
          action: `${oauthRoutes.interaction}/${interaction.uid}/login`,
          clientName: await clientName(interaction),
        }),
      );
      return;
    }
    await renderConsent(res, interaction, 200);
  });

  mount(
    router,
    endpoints.oauthSignIn,
    async (_input, req, res, next) => {
      if (!server) return next(notFound('endpoint'));
      const interaction = await interactionOf(req, res);
      if (!interaction) return;
      // The form is the page's own: a bad one shows the page again, not the API's error body.
      const form = endpoints.oauthSignIn.request.body.safeParse(req.body);
      const email = form.success ? form.data.email : undefined;
      const address = req.ip ?? 'unknown';
      const retryAfterSeconds = await throttle.waitSeconds(email, address);
      if (retryAfterSeconds > 0) {
        res.setHeader('Retry-After', String(retryAfterSeconds));
        sendPage(
          res,
          429,
          pages!.signIn({
            action: `${oauthRoutes.interaction}/${interaction.uid}/login`,
            clientName: await clientName(interaction),
            email,
            error: `Too many failed sign-ins. Try again in ${retryAfterSeconds} seconds.`,
          }),
        );
        return;
      }
      const user = form.success ? await findUserByEmail(sql, form.data.email) : undefined;
      const valid =
        form.success &&
        (user?.passwordHash
          ? await verifyPassword(form.data.password, user.passwordHash)
          : await verifyAgainstNothing(form.data.password));
      if (!valid || !user || interaction.prompt.name !== 'login') {
        if (!valid) await throttle.failed(email, address);
        sendPage(
          res,
          401,
          pages!.signIn({
            action: `${oauthRoutes.interaction}/${interaction.uid}/login`,
            clientName: await clientName(interaction),
            email: form.success ? form.data.email : undefined,
            error: 'Wrong email or password.',
          }),
        );
        return;
      }
      await throttle.succeeded(user.email);
      await (await server.provider()).interactionFinished(
        req,
        res,
        { login: { accountId: user.id } },
        { mergeWithLastSubmission: false },
      );
    },
    { before: [formBody] },
  );

  mount(
    router,
    endpoints.oauthConsent,
    async (_input, req, res, next) => {
      if (!server) return next(notFound('endpoint'));
      const provider = await server.provider();
      const interaction = await interactionOf(req, res);
      if (!interaction) return;
      if (interaction.prompt.name !== 'consent' || !interaction.session?.accountId) {
        sendPage(res, 400, pages!.error('invalid_request', 'sign in first'));
        return;
      }
      const form = endpoints.oauthConsent.request.body.safeParse(req.body);
      if (form.success && form.data.decision === 'deny') {
        await provider.interactionFinished(
          req,
          res,
          { error: 'access_denied', error_description: 'the user denied the request' },
          { mergeWithLastSubmission: false },
        );
        return;
      }
      const userId = interaction.session.accountId;
      const organizations = await listUserOrganizations(sql, userId);
      const organization = form.success
        ? organizations.find((org) => org.id === form.data.organization)
        : undefined;
      if (!organization) {
        await renderConsent(res, interaction, 400, 'Pick one of your organizations.');
        return;
      }
      const { resource, scopes } = requestedScopes(interaction);
      const grant = new provider.Grant({ accountId: userId, clientId: String(interaction.params.client_id) });
      if (scopes.length > 0) grant.addResourceScope(resource, scopes.join(' '));
      const missingOidc = interaction.prompt.details.missingOIDCScope as string[] | undefined;
      if (missingOidc?.length) grant.addOIDCScope(missingOidc.join(' '));
      const grantId = await grant.save();
      await recordGrantOrganization(sql, { grantId, organizationId: organization.id, userId });
      await provider.interactionFinished(
        req,
        res,
        { consent: { grantId } },
        { mergeWithLastSubmission: true },
      );
    },
    { before: [formBody] },
  );
  return router;
}
