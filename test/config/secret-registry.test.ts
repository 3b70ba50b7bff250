import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { MIN_SECRET_LENGTH, clearSecrets, redactSecrets, registerSecret, registerSecrets } from '../../src/config/secret-registry.js';

describe('the secret registry redacts every registered value, in the forms it travels in', () => {
  afterEach(() => clearSecrets());

  it('leaves text alone when nothing is registered', () => {
    assert.equal(redactSecrets('Authorization: Bearer sk-anything-at-all'), 'Authorization: Bearer sk-anything-at-all');
  });

  it('replaces a value with a marker naming its variable, every time it occurs', () => {
    registerSecret('ANTHROPIC_API_KEY', 'sk-ant-api03-abcdefgh');
    assert.equal(
      redactSecrets('401 {"headers":{"x-api-key":"sk-ant-api03-abcdefgh"}} and again sk-ant-api03-abcdefgh.'),
      '401 {"headers":{"x-api-key":"***[ANTHROPIC_API_KEY]"}} and again ***[ANTHROPIC_API_KEY].',
    );
  });

  it(`ignores values shorter than ${MIN_SECRET_LENGTH} characters, so short ones do not shred text`, () => {
    registerSecret('OPENAI_API_KEY', 'the');
    registerSecret('GITHUB_TOKEN', '1234567');
    registerSecret('AWS_SESSION_TOKEN', undefined);
    assert.equal(redactSecrets('the value 1234567 is there'), 'the value 1234567 is there');
  });

  it('redacts several secrets in one text, each under its own name', () => {
    registerSecrets({ ANTHROPIC_API_KEY: 'sk-ant-11111111', OPENAI_API_KEY: 'sk-proj-22222222', AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG' });
    assert.equal(
      redactSecrets('a=sk-ant-11111111 b=sk-proj-22222222 c=wJalrXUtnFEMI/K7MDENG'),
      'a=***[ANTHROPIC_API_KEY] b=***[OPENAI_API_KEY] c=***[AWS_SECRET_ACCESS_KEY]',
    );
  });

  it('redacts a value that contains another whole, and values that overlap, leaving no fragment', () => {
    registerSecret('SHORT', 'abcdefgh');
    registerSecret('LONG', 'xxabcdefghyy');
    assert.equal(redactSecrets('[xxabcdefghyy] [abcdefgh]'), '[***[LONG]] [***[SHORT]]');
    clearSecrets();
    registerSecret('A', 'AAAAAAAABBBB');
    registerSecret('B', 'BBBBCCCCCCCC');
    // The tail of A is the head of B: the whole run goes, naming both.
    assert.equal(redactSecrets('<AAAAAAAABBBBCCCCCCCC>'), '<***[A,B]>');
  });

  it('finds the URL-encoded, JSON-escaped and base64 forms, and a value with stray whitespace', () => {
    registerSecret('GITHUB_TOKEN', 'p@ss/word+"quoted"\n');
    const value = 'p@ss/word+"quoted"';
    for (const form of [value, encodeURIComponent(value), JSON.stringify(value).slice(1, -1), Buffer.from(value).toString('base64'), Buffer.from(value).toString('base64url')]) {
      assert.equal(redactSecrets(`<${form}>`), '<***[GITHUB_TOKEN]>', form);
    }
  });

  it('keeps serialised JSON valid', () => {
    registerSecret('OPENAI_API_KEY', 'sk-"odd\\value"-123');
    const text = JSON.stringify({ error: { message: 'bad key sk-"odd\\value"-123', nested: ['sk-"odd\\value"-123'] } });
    const parsed = JSON.parse(redactSecrets(text));
    assert.deepEqual(parsed, { error: { message: 'bad key ***[OPENAI_API_KEY]', nested: ['***[OPENAI_API_KEY]'] } });
  });
});
