/**
 * The few building blocks every config section is written with, so each option is one TypeBox
 * expression: its JSON Schema (what Ajv checks, with the default it fills in) and its TypeScript
 * type (`Static<>`) come from that one expression, and its doc comment sits on it.
 *
 * Import these from here, not from `../schema` (the entry re-exports the sections, and a section
 * importing the entry would be a cycle).
 */
import { OptionalKind, Type, type ObjectOptions, type SchemaOptions, type Static, type TInteger, type TObject, type TProperties, type TSchema, type TUnsafe } from '@sinclair/typebox';

export { Type, type Static };

/**
 * A config section: unknown keys refused (a misspelt option is an error, not a silently ignored
 * one). A property with a `default` may be left out of the file and is always present once loaded:
 * it is not `required` in the JSON Schema, yet not optional in the type, because Ajv fills it in.
 * `Type.Optional` marks the few properties whose absence itself means something.
 */
export function Section<P extends TProperties>(properties: P, options: ObjectOptions = {}): TObject<P> {
  const schema = Type.Object(properties, { additionalProperties: false, ...options });
  const required = Object.keys(properties).filter((key) => {
    const p = properties[key]!;
    return !('default' in p) && !(OptionalKind in p);
  });
  if (required.length > 0) schema.required = required;
  else delete (schema as { required?: string[] }).required;
  return schema;
}

/**
 * One of a few strings, as `{enum: [...]}`: Ajv then says "must be one of "a", "b"" (load.ts), where
 * a union of literals would give one "must be equal to constant" per choice.
 */
export function Enum<const V extends readonly string[]>(values: V, options: SchemaOptions = {}): TUnsafe<V[number]> {
  return Type.Unsafe<V[number]>({ ...options, enum: [...values] });
}

/**
 * `schema` or null, as one schema with `type: [t, "null"]` rather than an anyOf: Ajv fills in
 * defaults inside it (it never does inside anyOf) and names one type in its message.
 */
export function Nullable<T extends TSchema & { type: string }>(schema: T, options: SchemaOptions = {}): TUnsafe<Static<T> | null> {
  return Type.Unsafe<Static<T> | null>({ ...schema, ...options, type: [schema.type, 'null'] });
}

/** A duration in milliseconds: at least 1, at most a day. */
export function Ms(options: SchemaOptions & { default: number }): TInteger {
  return Type.Integer({ minimum: 1, maximum: 86_400_000, ...options });
}

/** Allowlist and listener names: they are metric labels, log fields and URL path segments. */
export const NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$';
