// What a PostgreSQL column can hold, for lookups by keys callers choose freely (assistant ids,
// store keys): a text value cannot contain NUL, an integer column holds 32 bits. A key outside
// that was never stored, so a lookup by it finds nothing, as on LMDB, instead of the driver's
// error (a 500).

/** whether `s` can be a text column's value (no NUL character) */
export const storableText = (s: string): boolean => !s.includes("\u0000");

/** whether `n` fits an `integer` column */
export const isInt4 = (n: number): boolean => Number.isInteger(n) && n >= -2_147_483_648 && n <= 2_147_483_647;
