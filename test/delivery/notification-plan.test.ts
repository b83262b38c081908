import { describe, expect, it } from 'vitest';
import { planRecipient, type NotifyNotification } from '../../src/delivery/notification-plan.js';
import { aNotification, aRecipient, without } from '../support/notify-builders.js';

const SOUND = { set_tweak: 'sound', value: 'default' };
const HIGHLIGHT = { set_tweak: 'highlight' };

describe('whether a recipient is pushed', () => {
  it.each<[string, unknown[] | undefined, boolean]>([
    ['absent actions (they mean ["notify"])', undefined, true],
    ['notify', ['notify'], true],
    ['notify after a tweak', [SOUND, 'notify'], true],
    ['no actions at all', [], false],
    ['only dont_notify', ['dont_notify'], false],
    ['only tweaks', [SOUND, HIGHLIGHT], false],
    ['coalesce (no longer in the spec)', ['coalesce'], false],
    ['notify inside an object, not as the word', [{ notify: true }], false],
    ['NOTIFY in capitals', ['NOTIFY'], false],
  ])('%s → %s', (_name, actions, pushed) => {
    const recipient = actions === undefined ? without(aRecipient(), 'actions') : aRecipient({ actions });
    expect(planRecipient(aNotification(), recipient).pushed).toBe(pushed);
  });
});

describe('the tweaks of a pushed recipient', () => {
  it.each<[string, unknown[], Record<string, unknown>]>([
    ['none without set_tweak', ['notify'], {}],
    ['sound with its value', ['notify', SOUND], { sound: 'default' }],
    ['highlight without a value is true', ['notify', HIGHLIGHT], { highlight: true }],
    ['highlight true', ['notify', { set_tweak: 'highlight', value: true }], { highlight: true }],
    ['highlight false is kept', ['notify', { set_tweak: 'highlight', value: false }], { highlight: false }],
    ['sound and highlight, in action order', ['notify', HIGHLIGHT, SOUND], { highlight: true, sound: 'default' }],
    [
      'a custom tweak with a value of any JSON type',
      ['notify', { set_tweak: 'org.example.led', value: { colour: 'green', blink: [1, 2] } }],
      { 'org.example.led': { colour: 'green', blink: [1, 2] } },
    ],
    ['a custom tweak with a null value', ['notify', { set_tweak: 'x', value: null }], { x: null }],
    ['a custom tweak without a value is left out', ['notify', { set_tweak: 'org.example.led' }], {}],
    ['a sound without a value is left out', ['notify', { set_tweak: 'sound' }], {}],
    [
      'the later of two actions for one tweak wins',
      ['notify', SOUND, { set_tweak: 'sound', value: 'ring' }],
      { sound: 'ring' },
    ],
    ['a set_tweak that is not a string is ignored', ['notify', { set_tweak: 1, value: 'x' }], {}],
    ['other objects and words are ignored', ['notify', 'dont_notify', { value: 'x' }, null, 3], {}],
    ['a tweak named __proto__ is plain data', ['notify', { set_tweak: '__proto__', value: 1 }], { ['__proto__']: 1 }],
  ])('%s', (_name, actions, tweaks) => {
    const plan = planRecipient(aNotification(), aRecipient({ actions }));
    if (!plan.pushed) throw new Error('expected a push');
    expect(plan.tweaks).toStrictEqual(Object.fromEntries(Object.entries(tweaks)));
    expect(Object.keys(plan.tweaks)).toEqual(Object.keys(tweaks));
    expect(Object.getPrototypeOf(plan.tweaks)).toBe(Object.prototype);
  });

  it('absent actions carry no tweaks', () => {
    const plan = planRecipient(aNotification(), without(aRecipient(), 'actions'));
    expect(plan).toEqual({ pushed: true, countsOnly: false, prio: 'low', tweaks: {} });
  });
});

describe('the prio of an event notification', () => {
  const message = { type: 'm.room.message' };
  it.each<[string, Partial<NotifyNotification>, unknown[], 'high' | 'low']>([
    ['given high wins over a quiet event', { ...message, prio: 'high' }, ['notify'], 'high'],
    ['given low wins over a sound', { ...message, prio: 'low' }, ['notify', SOUND], 'low'],
    ['given low wins over an encrypted event', { type: 'm.room.encrypted', prio: 'low' }, ['notify'], 'low'],
    ['an encrypted event is high', { type: 'm.room.encrypted' }, ['notify'], 'high'],
    ['a sound is high', message, ['notify', SOUND], 'high'],
    ['a sound of any value is high', message, ['notify', { set_tweak: 'sound', value: '' }], 'high'],
    ['a highlight without a value is high', message, ['notify', HIGHLIGHT], 'high'],
    ['a true highlight is high', message, ['notify', { set_tweak: 'highlight', value: true }], 'high'],
    ['a false highlight is low', message, ['notify', { set_tweak: 'highlight', value: false }], 'low'],
    ['a highlight of "true" (text) is low', message, ['notify', { set_tweak: 'highlight', value: 'true' }], 'low'],
    ['a sound without a value (no tweak) is low', message, ['notify', { set_tweak: 'sound' }], 'low'],
    ['a custom tweak is low', message, ['notify', { set_tweak: 'org.example.led', value: 'x' }], 'low'],
    ['a plain message is low', message, ['notify'], 'low'],
    ['an event of no type is low', {}, ['notify'], 'low'],
  ])('%s', (_name, fields, actions, prio) => {
    const notification = { ...without(aNotification(), 'type', 'prio'), ...fields };
    expect(planRecipient(notification, aRecipient({ actions }))).toMatchObject({ pushed: true, prio });
  });
});

describe('a counts-only update (no event_id)', () => {
  const badge = without(aNotification(), 'event_id');
  it.each<[string, Partial<NotifyNotification>, unknown[] | undefined]>([
    ['with absent actions', {}, undefined],
    ['with actions that would not notify', {}, []],
    ['with dont_notify', {}, ['dont_notify']],
    ['with a sound and a highlight', {}, ['notify', SOUND, HIGHLIGHT]],
    ['with prio high given', { prio: 'high' }, ['notify']],
    ['of an encrypted event type', { type: 'm.room.encrypted' }, ['notify']],
  ])('goes to the devices, low and without tweaks, %s', (_name, fields, actions) => {
    const recipient = actions === undefined ? without(aRecipient(), 'actions') : aRecipient({ actions });
    expect(planRecipient({ ...badge, ...fields }, recipient)).toEqual({
      pushed: true,
      countsOnly: true,
      prio: 'low',
      tweaks: {},
    });
  });
});
