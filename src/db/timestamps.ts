/**
 * PostgreSQL's text form of a `timestamp` (without time zone) read as UTC wall time, which is
 * how Prisma's `timestamp(3)` columns hold it. List reads parse several per row, and handing
 * `Date` the ISO string costs about twice as much as reading the digits, so the shape PostgreSQL
 * prints (`YYYY-MM-DD HH:MM:SS[.ffffff]`) is read by hand; anything else (BC dates, years past
 * 9999, infinity) goes through `Date`'s own parser as before.
 */
export function parseUtcTimestamp(text: string): Date {
  const len = text.length;
  if (
    len >= 19 &&
    len <= 26 &&
    text.charCodeAt(4) === 45 && // -
    text.charCodeAt(7) === 45 &&
    text.charCodeAt(10) === 32 && // space
    text.charCodeAt(13) === 58 && // :
    text.charCodeAt(16) === 58 &&
    (len === 19 || (len > 20 && text.charCodeAt(19) === 46)) // .
  ) {
    const year = digits(text, 0, 4);
    const month = digits(text, 5, 7);
    // Milliseconds from the first three fraction digits, as Date's parser truncates them.
    const fractionEnd = Math.min(len, 23);
    let ms = len > 20 ? digits(text, 20, fractionEnd) : 0;
    for (let k = fractionEnd - 20; k < 3 && len > 20; k++) ms *= 10;
    const time = Date.UTC(year, month - 1, digits(text, 8, 10), digits(text, 11, 13), digits(text, 14, 16), digits(text, 17, 19), ms);
    // Date.UTC reads years 0..99 as 1900..1999.
    if (year >= 100 && month >= 1 && month <= 12 && time === time) return new Date(time);
  }
  return new Date(`${text.replace(' ', 'T')}Z`);
}

/** The decimal number in text[from, to), NaN if any character is not a digit. */
function digits(text: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return NaN;
    n = n * 10 + d;
  }
  return n;
}
