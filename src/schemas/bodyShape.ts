/**
 * Shape limits every request body obeys, JSON or multipart: no real request nests deeper than MAX_BODY_DEPTH, and
 * no key may name a prototype. Recursive code downstream (validation, hashing, translation) must never see more,
 * and a key walked into while building an object must never reach Object.prototype.
 */

/** Levels of nesting, the body itself counting as 1 (a form name `a[b][c]` nests 3 deep). */
export const MAX_BODY_DEPTH = 64;

/** Keys that reach a prototype when an object is built or merged key by key. */
const PROTOTYPE_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** A multipart field name in bracket notation (`a[b][]`) as its path of keys, or null when it is not in that form. */
export function formNamePath(name: string): string[] | null {
  const m = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(name);
  if (!m) return null;
  return [m[1], ...[...m[2].matchAll(/\[([^[\]]*)\]/g)].map((x) => x[1])];
}

export type BodyShapeProblem = 'too_deep' | 'prototype_key';

/**
 * What is wrong with a multipart field name, if anything: nested more than MAX_BODY_DEPTH levels of brackets, or a
 * key (`__proto__`, `constructor`, `prototype`) that would walk into a prototype when the form becomes an object.
 * Counts brackets before any regular expression runs, so a name of 50,000 brackets costs one scan.
 */
export function formNameProblem(name: string): BodyShapeProblem | null {
  let depth = 1;
  for (let i = 0; i < name.length; i++)
    if (name.charCodeAt(i) === 91 /* [ */ && ++depth > MAX_BODY_DEPTH) return 'too_deep';
  const path = formNamePath(name) ?? [name];
  return path.some((k) => PROTOTYPE_KEYS.has(k)) ? 'prototype_key' : null;
}

/** The 400 message for a form field name's problem. */
export function formNameMessage(problem: BodyShapeProblem): string {
  return problem === 'too_deep'
    ? `The form has a field name nested more than ${MAX_BODY_DEPTH} levels deep.`
    : 'The form has a field name with a forbidden key ("__proto__", "constructor" or "prototype").';
}

/**
 * What is wrong with a parsed JSON body, if anything: nested deeper than `max`, or a prototype-poisoning key
 * (`__proto__`, or `constructor` holding a `prototype`) that a later merge of the object could act on.
 * Iterative (a recursive walk would overflow on exactly the input it guards against); stops at the first finding.
 */
export function jsonBodyProblem(root: object, max: number): 'too_deep' | 'prototype_key' | null {
  const stack: [unknown, number][] = [[root, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (d > max) return 'too_deep';
    if (Array.isArray(v)) {
      for (const x of v) if (x !== null && typeof x === 'object') stack.push([x, d + 1]);
    } else {
      for (const k in v as Record<string, unknown>) {
        const x = (v as Record<string, unknown>)[k];
        if (
          k === '__proto__' ||
          (k === 'constructor' && x !== null && typeof x === 'object' && Object.hasOwn(x, 'prototype'))
        )
          return 'prototype_key';
        if (x !== null && typeof x === 'object') stack.push([x, d + 1]);
      }
    }
  }
  return null;
}
