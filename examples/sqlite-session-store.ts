/**
 * A small persistent express-session store on better-sqlite3, so the example provider's SSO
 * sessions survive a restart without another dependency. Sessions expire with their cookie.
 */
import Database from 'better-sqlite3';
import session from 'express-session';

const DAY_MS = 24 * 60 * 60 * 1000;

export function sqliteSessionStore(options: { path: string }): session.Store & { close(): void } {
  const db = new Database(options.path);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE IF NOT EXISTS sessions (sid TEXT PRIMARY KEY, data TEXT NOT NULL, expires_at INTEGER NOT NULL)');
  const get = db.prepare<[string, number], { data: string }>('SELECT data FROM sessions WHERE sid = ? AND expires_at > ?');
  const put = db.prepare('INSERT INTO sessions (sid, data, expires_at) VALUES (?, ?, ?) ON CONFLICT (sid) DO UPDATE SET data = excluded.data, expires_at = excluded.expires_at');
  const remove = db.prepare('DELETE FROM sessions WHERE sid = ?');
  const touch = db.prepare('UPDATE sessions SET expires_at = ? WHERE sid = ?');
  const sweep = db.prepare('DELETE FROM sessions WHERE expires_at <= ?');
  const expiry = (data: session.SessionData) => (data.cookie.expires ? new Date(data.cookie.expires).getTime() : Date.now() + DAY_MS);
  const timer = setInterval(() => sweep.run(Date.now()), 10 * 60 * 1000);
  timer.unref();

  class SqliteSessionStore extends session.Store {
    override get(sid: string, callback: (err: unknown, data?: session.SessionData | null) => void): void {
      try {
        const row = get.get(sid, Date.now());
        callback(null, row === undefined ? null : (JSON.parse(row.data) as session.SessionData));
      } catch (error) {
        callback(error);
      }
    }
    override set(sid: string, data: session.SessionData, callback?: (err?: unknown) => void): void {
      try {
        put.run(sid, JSON.stringify(data), expiry(data));
        callback?.();
      } catch (error) {
        callback?.(error);
      }
    }
    override destroy(sid: string, callback?: (err?: unknown) => void): void {
      try {
        remove.run(sid);
        callback?.();
      } catch (error) {
        callback?.(error);
      }
    }
    override touch(sid: string, data: session.SessionData, callback?: () => void): void {
      touch.run(expiry(data), sid);
      callback?.();
    }
    close(): void {
      clearInterval(timer);
      db.close();
    }
  }
  return new SqliteSessionStore();
}
