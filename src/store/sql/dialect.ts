/**
 * The dialect shim of the statements module: what differs between SQLite and PostgreSQL in the
 * statements the durable stores share, and nothing else. Statements are written once with named
 * parameters (`@name`, with an optional PostgreSQL cast `@name::bigint` that SQLite drops) and
 * compiled per dialect to positional ones (`?` for better-sqlite3, `$n` for pg).
 *
 * Times are always parameters (the contract passes them in), never the database's clock, so no
 * `now()` / `strftime` difference has to be shimmed.
 */

export type Dialect = 'sqlite' | 'postgres';

/** A statement compiled for one dialect: positional text and the parameter name of each position. */
export interface Statement {
  readonly text: string;
  /** SQLite: one name per `?`. PostgreSQL: the name of `$1`, `$2`, … */
  readonly names: readonly string[];
}

const PARAMETER = /@([A-Za-z][A-Za-z0-9]*)(::[a-z0-9]+(?:\[\])?)?/g;

/** Compiles `@name` parameters to the dialect's positional form. */
export function compile(dialect: Dialect, source: string): Statement {
  const names: string[] = [];
  const text = source.replace(PARAMETER, (_match, name: string, cast: string | undefined) => {
    if (dialect === 'sqlite') {
      names.push(name);
      return '?';
    }
    let index = names.indexOf(name);
    if (index < 0) index = names.push(name) - 1;
    return `$${index + 1}${cast ?? ''}`;
  });
  return { text: text.replace(/\s+/g, ' ').trim(), names };
}

/** The positional values of a statement from named ones; a missing value binds NULL. */
export function bind(statement: Statement, values: Readonly<Record<string, unknown>>): unknown[] {
  return statement.names.map((name) => values[name] ?? null);
}

/** The SQL fragments that differ between the dialects. */
export interface Shim {
  readonly dialect: Dialect;
  /** A table name: schema-qualified on PostgreSQL, plain on SQLite (one file, one schema). */
  table(name: string): string;
  /** A JSON object built from alternating key literals and SQL values. */
  jsonObject(...pairs: string[]): string;
  /**
   * Rows from a JSON array of objects bound as one parameter (a whole batch in one statement):
   * a FROM clause yielding the given columns under their own names.
   */
  jsonRecords(parameter: string, columns: readonly (readonly [name: string, pgType: string])[]): string;
}

export function shim(dialect: Dialect, schema?: string): Shim {
  if (dialect === 'sqlite') {
    return {
      dialect,
      table: (name) => name,
      jsonObject: (...pairs) => `json_object(${pairs.join(', ')})`,
      jsonRecords: (parameter, columns) =>
        `(SELECT ${columns.map(([name]) => `json_extract(value, '$.${name}') AS ${name}`).join(', ')} FROM json_each(@${parameter}))`,
    };
  }
  return {
    dialect,
    table: (name) => `"${schema ?? 'public'}".${name}`,
    jsonObject: (...pairs) => `json_build_object(${pairs.join(', ')})`,
    jsonRecords: (parameter, columns) =>
      `json_to_recordset(@${parameter}::json) AS r(${columns.map(([name, type]) => `${name} ${type}`).join(', ')})`,
  };
}
