/**
 * The building blocks every config section is written with, so each option is one TypeBox
 * expression: its JSON Schema (what Ajv checks, with the default it fills in) and its TypeScript
 * type (`Static<>`) come from that one expression, and its doc comment sits on it.
 *
 * `Type` here is TypeBox's `Type` for the builders the config needs (Object, String, Integer,
 * Number, Boolean, Array, Union, Literal, Null, Optional, Unsafe), with TypeBox's own signatures
 * and the very objects TypeBox builds (test/unit/config/schema-kit.test.ts compares them). Only
 * TypeBox's types are imported: its package is ~200 modules, which cost every process start
 * 2.7 MiB of RSS and 70-150 ms of CPU (docs/architecture.md "Config") to build one schema that Ajv
 * then compiles on its own. A section may use `@sinclair/typebox`'s `Type` instead and mixes
 * freely (same objects), at that start-up cost.
 *
 * Import these from here, not from `../schema` (the entry re-exports the sections, and a section
 * importing the entry would be a cycle).
 */
import type {
  ArrayOptions,
  IntegerOptions,
  NumberOptions,
  ObjectOptions,
  SchemaOptions,
  Static,
  StringOptions,
  TArray,
  TBoolean,
  TInteger,
  TLiteral,
  TLiteralValue,
  TNull,
  TNumber,
  TObject,
  TOptional,
  TProperties,
  TSchema,
  TString,
  TUnion,
  TUnsafe,
} from '@sinclair/typebox';

export type { Static, TObject, TProperties, TSchema };

/** TypeBox's symbols (registered with Symbol.for, so these are the very same). */
export const Kind = Symbol.for('TypeBox.Kind');
export const OptionalKind = Symbol.for('TypeBox.Optional');

/** TypeBox's CreateType in its default instance mode: options first, the schema's own keys win. */
function create<T>(schema: object, options: object | undefined): T {
  return (options !== undefined ? { ...options, ...schema } : schema) as T;
}

export const Type = {
  Object<P extends TProperties>(properties: P, options?: ObjectOptions): TObject<P> {
    const required = globalThis.Object.keys(properties).filter((key) => !(OptionalKind in properties[key]!));
    return create(
      required.length > 0 ? { [Kind]: 'Object', type: 'object', required, properties } : { [Kind]: 'Object', type: 'object', properties },
      options,
    );
  },
  String: (options?: StringOptions): TString => create({ [Kind]: 'String', type: 'string' }, options),
  Integer: (options?: IntegerOptions): TInteger => create({ [Kind]: 'Integer', type: 'integer' }, options),
  Number: (options?: NumberOptions): TNumber => create({ [Kind]: 'Number', type: 'number' }, options),
  Boolean: (options?: SchemaOptions): TBoolean => create({ [Kind]: 'Boolean', type: 'boolean' }, options),
  Null: (options?: SchemaOptions): TNull => create({ [Kind]: 'Null', type: 'null' }, options),
  Array: <T extends TSchema>(items: T, options?: ArrayOptions): TArray<T> => create({ [Kind]: 'Array', type: 'array', items }, options),
  Literal: <V extends TLiteralValue>(value: V, options?: SchemaOptions): TLiteral<V> =>
    create({ [Kind]: 'Literal', const: value, type: typeof value }, options),
  /** At least two alternatives (TypeBox turns fewer into the type itself or Never). */
  Union: <T extends [TSchema, TSchema, ...TSchema[]]>(types: [...T], options?: SchemaOptions): TUnion<T> =>
    create({ [Kind]: 'Union', anyOf: types }, options),
  Optional: <T extends TSchema>(schema: T): TOptional<T> => ({ ...schema, [OptionalKind]: 'Optional' }) as TOptional<T>,
  Unsafe: <T>(options: SchemaOptions = {}): TUnsafe<T> => create({ [Kind]: (options as { [Kind]?: string })[Kind] ?? 'Unsafe' }, options),
};

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
