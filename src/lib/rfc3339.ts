// RFC 3339 section 5.6 date-time, strictly: Date.parse accepts far more (and differs by engine).
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|([+-])(\d{2}):(\d{2}))$/;

/**
 * Milliseconds since the epoch for an RFC 3339 date-time, or `undefined` when the text is not one
 * (wrong shape, or a field out of range such as February 30 or 24:00:00).
 */
export function parseRfc3339(text: string): number | undefined {
  if (text.length > 40) return undefined;
  const match = DATE_TIME.exec(text);
  if (match === null) return undefined;
  const [, y, mo, d, h, mi, s, fraction, zone, sign, zh, zm] = match;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  // A leap second (60) is valid RFC 3339; count it as the last second of the minute.
  const second = Math.min(Number(s), 59);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || Number(s) > 60) return undefined;
  if (day > utc(year, month, 0, 0, 0, 0, 0).getUTCDate()) return undefined;
  let offsetMinutes = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const offsetHours = Number(zh);
    const offsetMins = Number(zm);
    if (offsetHours > 23 || offsetMins > 59) return undefined;
    offsetMinutes = (offsetHours * 60 + offsetMins) * (sign === '-' ? -1 : 1);
  }
  const millis = fraction === undefined ? 0 : Math.floor(Number(`0${fraction}`) * 1000);
  return utc(year, month - 1, day, hour, minute, second, millis).getTime() - offsetMinutes * 60_000;
}

/** `Date.UTC` reads years 0 to 99 as 1900 to 1999; RFC 3339 years are literal (`0017` is 17). */
function utc(year: number, monthIndex: number, day: number, hour: number, minute: number, second: number, millis: number): Date {
  const date = new Date(Date.UTC(2000, 0, 1, hour, minute, second, millis));
  date.setUTCFullYear(year, monthIndex, day);
  return date;
}
