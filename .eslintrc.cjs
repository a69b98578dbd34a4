/* ESLint 9 reading the legacy config format, as the project's design asks (run with ESLINT_USE_FLAT_CONFIG=false). */
module.exports = {
  root: true,
  parser: '@typescript-eslint/parser',
  parserOptions: { project: './tsconfig.json', tsconfigRootDir: __dirname, sourceType: 'module' },
  plugins: ['@typescript-eslint'],
  extends: ['eslint:recommended', 'plugin:@typescript-eslint/strict', 'plugin:@typescript-eslint/stylistic'],
  env: { node: true, es2022: true },
  ignorePatterns: ['dist/', 'node_modules/', 'coverage/', '*.cjs', 'scripts/*.mjs'],
  rules: {
    '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
    '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    '@typescript-eslint/no-non-null-assertion': 'off',
    '@typescript-eslint/no-dynamic-delete': 'off',
    '@typescript-eslint/no-invalid-void-type': 'off',
    'no-console': 'error',
    // Type-checked rules, chosen for the bugs they catch rather than style: a promise nobody awaits
    // or handles (an unhandled rejection ends the process; an Express 4 handler returning a promise
    // hangs the request), a promise where a callback is expected, awaiting a non-promise, a misused
    // spread, and assertions that assert nothing.
    '@typescript-eslint/no-floating-promises': ['error', {
      // node:test's describe/it/test return promises the runner itself awaits.
      allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] }],
    }],
    '@typescript-eslint/no-misused-promises': 'error',
    '@typescript-eslint/await-thenable': 'error',
    '@typescript-eslint/return-await': ['error', 'error-handling-correctness-only'],
    '@typescript-eslint/restrict-plus-operands': 'error',
    '@typescript-eslint/no-unnecessary-type-assertion': 'error',
    '@typescript-eslint/no-meaningless-void-operator': 'error',
    '@typescript-eslint/no-misused-spread': 'error',
    '@typescript-eslint/no-redundant-type-constituents': 'error',
    '@typescript-eslint/no-duplicate-type-constituents': 'error',
    '@typescript-eslint/no-implied-eval': 'error',
    '@typescript-eslint/no-array-delete': 'error',
    '@typescript-eslint/no-for-in-array': 'error',
  },
  overrides: [
    { files: ['examples/**', 'bench/**', 'scripts/**', 'src/testkit/cli.ts', 'src/testkit/cli/**'], rules: { 'no-console': 'off' } },
    { files: ['test/**'], rules: { 'no-console': 'off' } },
    // Type tests assert types with `as` on purpose.
    { files: ['test/types/**', 'test/**/*types.test.ts'], rules: { '@typescript-eslint/no-unnecessary-type-assertion': 'off', '@typescript-eslint/no-meaningless-void-operator': 'off' } },
  ],
};
