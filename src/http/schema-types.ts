// A structural JSON Schema type, loose enough for ajv and the OpenAPI generator alike.
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema | JsonSchema[];
  enum?: readonly unknown[];
  const?: unknown;
  format?: string;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  additionalProperties?: boolean | JsonSchema;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  default?: unknown;
  description?: string;
  title?: string;
  nullable?: boolean;
  $ref?: string;
  [key: string]: unknown;
}

declare const accepts: unique symbol;

/**
 * A JSON schema that also tells the type checker what a value it accepts looks like (a phantom: no
 * such property exists at run time). Route handlers get their body and query typed from it.
 */
export interface Schema<T> extends JsonSchema {
  readonly [accepts]?: T;
}

/** What a schema accepts: its `Schema<T>`'s T; `unknown` for a plain JsonSchema. */
export type Accepted<S> = S extends Schema<infer T> ? (unknown extends T ? unknown : T) : unknown;

/** A schema with a default: ajv (useDefaults) fills the value in, so the property is always present. */
export type Defaulted<T> = Schema<T> & { default: T };

type Simplify<T> = { [K in keyof T]: T[K] } & {};
type PresentKeys<P, R> = { [K in keyof P]: K extends R ? K : P[K] extends { default: unknown } ? K : never }[keyof P];

/** The value an object schema with these properties (the `required` ones, plus those with defaults, always present) accepts. */
export type ObjectOf<P extends Record<string, JsonSchema>, R extends keyof P> = Simplify<
  { [K in PresentKeys<P, R>]: Accepted<P[K]> } & { [K in Exclude<keyof P, PresentKeys<P, R>>]?: Accepted<P[K]> }
>;
