import type { Sql } from '../../db';
import { findOrganization } from '../../db/organizations';
import { listFieldDefinitions } from '../../db/sample-fields';
import { markerCatalog } from '../../models/registry';
import type { Principal } from '../auth';

/** Field definitions and the marker catalog an organization sees. */
export function createCatalogService(deps: { sql: Sql }) {
  async function fields(principal: Principal) {
    const definitions = await listFieldDefinitions(deps.sql, principal.organizationId);
    return { count: definitions.length, fields: definitions };
  }

  /** The registry's catalog narrowed to the organization's entitlement (none: the full panel). */
  async function markers(principal: Principal) {
    const organization = await findOrganization(deps.sql, principal.organizationId);
    const entitlement = organization?.markerEntitlement ?? null;
    const catalog = markerCatalog();
    const entitled =
      entitlement === null ? catalog : catalog.filter((marker) => entitlement.includes(marker.name));
    return {
      fullPanel: entitled.length === catalog.length,
      count: entitled.length,
      markers: entitled.map((marker) => ({ name: marker.name, publicPanel: marker.publicPanel })),
    };
  }

  return { fields, markers };
}

export type CatalogService = ReturnType<typeof createCatalogService>;
