/**
 * The package's log redaction, compiled once from pino-style paths (`a`, `a.b`, `a["x-y"]`, `*.b`).
 *
 * Why not pino's own `redact` option: since pino 9.12 replaced fast-redact, it parses every path
 * again and copies the logged object on every line, about 10 µs and 16 KB of garbage per line
 * with the package's thirty paths (docs/performance.md), while nearly every line the package
 * writes (one per request) holds no key any path names. This one walks the keys a line has against
 * a tree of the paths: a line without a sensitive key costs a few property checks and is passed on
 * as it is; a line with one is copied along the redacted path only, so the caller's object is
 * never changed.
 */

interface PathTree {
  /** Keys whose value is replaced at this level. */
  leaves: Set<string>;
  /** Keys below which some path continues. */
  children: Map<string, PathTree>;
  /** Where a `*` continues: below every key of this level. */
  any: PathTree | undefined;
}

/** Replaces the values `paths` name with `censor`; answers its argument when nothing was named. */
export type Redactor = <T>(value: T) => T;

/**
 * Compiles `paths` (pino's syntax: dots, `["quoted"]` segments, `*` for any key at that level).
 *
 * @throws {TypeError} for a path it cannot read (empty, or an unclosed bracket).
 */
export function compileRedaction(paths: readonly string[], censor: unknown): Redactor {
  const root = newTree();
  for (const path of paths) {
    const parts = parsePath(path);
    let tree = root;
    for (let i = 0; i < parts.length - 1; i++) {
      const part = parts[i]!;
      if (part === '*') tree = tree.any ??= newTree();
      else {
        let next = tree.children.get(part);
        if (next === undefined) tree.children.set(part, (next = newTree()));
        tree = next;
      }
    }
    const last = parts[parts.length - 1]!;
    if (last === '*') throw new TypeError(`redaction path "${path}" ends with "*"`);
    tree.leaves.add(last);
  }
  return <T>(value: T): T => {
    try {
      return redact(value, root, censor) as T;
    } catch {
      // A getter that throws, a proxy: a log line must not fail its caller, nor leak what it
      // could not check.
      return UNREADABLE as T;
    }
  };
}

/** What a log object that could not be read for redaction is replaced with. */
const UNREADABLE = Object.freeze({ redaction: 'failed: the logged object could not be read' });

function newTree(): PathTree {
  return { leaves: new Set(), children: new Map(), any: undefined };
}

function redact(value: unknown, tree: PathTree, censor: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  let copy: Record<string, unknown> | unknown[] | undefined;
  const source = value as Record<string, unknown>;
  for (const key in source) {
    if (!Object.hasOwn(source, key)) continue;
    const current = source[key];
    let next: unknown;
    if (tree.leaves.has(key)) next = censor;
    else {
      next = current;
      const child = tree.children.get(key);
      if (child !== undefined) next = redact(next, child, censor);
      if (tree.any !== undefined) next = redact(next, tree.any, censor);
    }
    if (next === current) continue;
    copy ??= copyOf(source);
    Object.defineProperty(copy, key, { value: next, enumerable: true, writable: true, configurable: true });
  }
  return copy ?? value;
}

/**
 * A shallow copy to redact into. Plain objects and arrays by spreading; anything else (an Error,
 * a class instance) with its prototype and every own property, enumerable or not, so that an
 * error keeps its message and stack for the serializer.
 */
function copyOf(source: Record<string, unknown>): Record<string, unknown> | unknown[] {
  if (Array.isArray(source)) return [...(source as unknown[])];
  const proto = Object.getPrototypeOf(source) as object | null;
  if (proto === Object.prototype || proto === null) return { ...source };
  // Writable and configurable in the copy, whatever they were (a frozen object), so that a
  // redacted value can be put in their place.
  const descriptors = Object.getOwnPropertyDescriptors(source) as Record<string | symbol, PropertyDescriptor>;
  for (const key of Reflect.ownKeys(descriptors)) {
    const descriptor = descriptors[key]!;
    descriptor.configurable = true;
    if ('value' in descriptor) descriptor.writable = true;
  }
  return Object.defineProperties(Object.create(proto) as Record<string, unknown>, descriptors);
}

/** `a.b["x-y"].c` → `['a', 'b', 'x-y', 'c']`. */
function parsePath(path: string): string[] {
  const parts: string[] = [];
  let i = 0;
  while (i < path.length) {
    if (path[i] === '[') {
      const quote = path[i + 1];
      const close = quote === '"' || quote === "'" ? path.indexOf(`${quote}]`, i + 2) : -1;
      if (close === -1) throw new TypeError(`redaction path "${path}" has an unclosed bracket`);
      parts.push(path.slice(i + 2, close));
      i = close + 2;
      if (path[i] === '.') i++;
      continue;
    }
    let end = i;
    while (end < path.length && path[end] !== '.' && path[end] !== '[') end++;
    if (end === i) throw new TypeError(`redaction path "${path}" has an empty segment`);
    parts.push(path.slice(i, end));
    i = path[end] === '.' ? end + 1 : end;
  }
  if (parts.length === 0) throw new TypeError('a redaction path is empty');
  return parts;
}
