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
  },
  overrides: [
    { files: ['examples/**', 'bench/**', 'scripts/**', 'src/testkit/cli.ts', 'src/testkit/cli/**'], rules: { 'no-console': 'off' } },
    { files: ['test/**'], rules: { 'no-console': 'off', '@typescript-eslint/no-floating-promises': 'off' } },
  ],
};
