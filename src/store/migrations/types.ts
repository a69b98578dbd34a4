/**
 * One versioned schema change. Versions start at 1 and increase by one; a migration, once released,
 * never changes (a fix is a new migration). Migrations stay additive (new tables, columns with
 * defaults, indexes) so that an instance still running the previous release keeps working against
 * the migrated schema during a rolling deploy.
 */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** The highest version in a list of migrations. */
export function latestVersion(migrations: readonly Migration[]): number {
  return migrations.reduce((max, migration) => Math.max(max, migration.version), 0);
}

