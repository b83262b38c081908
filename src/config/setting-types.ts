import { CloneType, Type } from '@sinclair/typebox';

/** A queue, exchange or collection name. */
export const Name = Type.String({ minLength: 1, maxLength: 255 });

/**
 * `description` options are documentation only (annotations, which the
 * validator ignores): `npm run docs:config` writes them into
 * docs/configuration.md.
 */
export const named = (description: string) => CloneType(Name, { description });
export const queueType = (description: string) =>
  Type.Union([Type.Literal('quorum'), Type.Literal('classic')], { description });
